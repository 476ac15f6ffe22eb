"""A local SageMaker that runs the real container: endpoints on the emulator start ``python -m gateway serve``.

Opt-in, on top of the moto server (:func:`devtools.emulator.moto_server`). While :func:`hosting` is
active, an endpoint whose model's ``PrimaryContainer.Image`` is the project's image (repository
``manga-llm``) really runs, driven by the ordinary boto3 ``sagemaker``/``sagemaker-runtime`` clients::

    tiny = ensure_tiny_model(".cache/tiny-model")
    with moto_server(), hosting(workdir) as sm:
        boto3.client("s3").create_bucket(Bucket="models")
        url = upload_model(tiny, "s3://models/v1/model.tar.gz", workdir)
        client = boto3.client("sagemaker")
        client.create_model(ModelName="m1", ExecutionRoleArn=ROLE, PrimaryContainer={
            "Image": f"{ECR}/manga-llm:v7", "ModelDataUrl": url, "Environment": contract_env})
        client.create_endpoint_config(...); client.create_endpoint(...)
        client.get_waiter("endpoint_in_service").wait(EndpointName="manga-chat")
        boto3.client("sagemaker-runtime").invoke_endpoint(EndpointName="manga-chat", Body=b"{...}")
        sm.serving("manga-chat", "primary").pid

What is emulated, as SageMaker does it:

- **Containers.** CreateEndpoint/UpdateEndpoint start one container per production variant whose
  model uses the image, the way SageMaker starts the image (``serve``): the model's ``Environment``
  passed through unchanged, its ``ModelDataUrl`` (a ``model.tar.gz`` in the emulated S3) downloaded
  over the emulator's HTTP API and unpacked into a folder that stands for ``/opt/ml/model``
  (``MODEL_DIR``; cached by URL and ETag). **One process stands for all of a variant's instances**
  (``InstanceType`` and counts are not emulated), and each owns its supervised vLLM engine, as the
  real image does; it runs pinned to a CPU core no other running container has (while the machine
  has enough), as an instance has CPUs of its own. A variant whose model, image, artifact, environment
  and instance type did not change keeps its running container across an UpdateEndpoint (SageMaker's
  blue/green would provision a new fleet; here that would only double the CPU engines).
- **Status.** ``Creating``/``Updating`` until every new container answers ``GET /ping`` 200, then
  ``InService`` (an update also waits ``sagemaker.behaviour.update_seconds``). A new container that
  exits, cannot get its artifact, or is not healthy within ``health_timeout_s`` fails a new endpoint
  (``Failed``) or rolls an update back (``InService`` on the previous config); ``FailureReason`` is
  SageMaker's health-check message with the container's last stderr lines. Containers the new config
  no longer runs get SIGTERM (the gateway drains) when the update completes; DeleteEndpoint stops all.
  UpdateEndpointWeightsAndCapacities starts nothing.
- **Runtime.** InvokeEndpoint and InvokeEndpointWithResponseStream reach the containers (see
  :mod:`devtools.emulator_extensions.sagemaker_runtime`).
- **Logs.** Every line a container writes on stdout or stderr goes to the emulated CloudWatch Logs,
  group ``/aws/sagemaker/Endpoints/<endpoint>``, stream ``<variant>/<instance-id>``, through
  PutLogEvents over HTTP, batched every ``log_interval_s``; an event's timestamp is when the line was read.
  As on AWS, the container's EMF lines become CloudWatch metrics there
  (:mod:`devtools.emulator_extensions.logs_emf`).
- **Metrics.** Every invocation adds SageMaker's per-variant ``AWS/SageMaker`` datapoints
  (:mod:`devtools.emulator_extensions.sagemaker_metrics`).

Not emulated: instance counts and types, auto scaling, replacing an instance whose ``/ping`` fails
after ``InService`` (nothing watches a container once it is healthy), deployment guardrails
(canary/linear traffic shifting, auto-rollback alarms), ``RetainAllVariantProperties``, data capture,
multi-container models, the ``RollingBack`` status, and the 2 s limit on a ``/ping`` answer.
Locally the container listens on a free loopback port (``PORT``/``SAGEMAKER_BIND_TO_PORT``,
``BIND_HOST=127.0.0.1``) and its engine on another (``ENGINE_PORT``), with the offline Hugging Face
settings and a 1 GiB CPU KV cache; :attr:`LocalSageMaker.host_env` adds defaults under the model's
own environment: ``GATEWAY_CONFIG``, the image's ``gateway.yaml`` with the CPU engine's flags
(``--block-size 32``, like the container tests), and a shorter ``METRICS_INTERVAL_S``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import sys
import tarfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import boto3
import httpx
from botocore.exceptions import BotoCoreError, ClientError

from devtools import emulator_extensions
from devtools.emulator import free_port
from devtools.emulator_extensions import sagemaker
from devtools.local_serving import CPU_ENGINE_ARGS, Process, _spawn, engine_env, engine_pids, write_config
from devtools.tiny_model import LORA_RANK, LORA_TARGETS, VERSION, TinyModel
from fleetops.model_contract import ENGINE_KNOB_PREFIX, OWNED
from fleetops.promotion.artifact_s3 import ArtifactFetchError, split_s3_url

if TYPE_CHECKING:
    from moto.sagemaker.models import FakeEndpoint, FakeEndpointConfig, SageMakerModelBackend

#: The project's image repository (``<account>.dkr.ecr.<region>.amazonaws.com/manga-llm:<tag>``).
IMAGE_REPOSITORY = "manga-llm"
#: Variables of the shell running the tests that a container must not inherit (the model's own say).
_GATEWAY_VARIABLES = frozenset(
    {*OWNED, "BACKEND_VERSION", "GATEWAY_CONFIG", "MODEL_DIR", "ADAPTERS_DIR", "ENGINE_URL", "PORT", "ENGINE_PORT"}
    | {"SAGEMAKER_BIND_TO_PORT", "BIND_HOST", "SAGEMAKER_ENDPOINT_NAME", "SAGEMAKER_VARIANT_NAME"}
)
#: PutLogEvents limits: events per call, bytes per call (each event counts 26 more), bytes per event.
_MAX_EVENTS, _MAX_BATCH_BYTES, _MAX_EVENT_BYTES = 10_000, 1_048_576, 262_144 - 26
#: DescribeEndpoint's FailureReason holds at most 1024 characters.
_MAX_FAILURE_REASON = 1024

ContainerState = Literal["provisioning", "starting", "healthy", "failed", "stopping", "stopped"]


# ---------------------------------------------------------------- model artifacts
def image_repository(image: str) -> str:
    """The repository of an image URI (registry and tag or digest removed).

    Examples
    --------
    >>> image_repository("123456789012.dkr.ecr.us-east-1.amazonaws.com/manga-llm:v7")
    'manga-llm'
    >>> image_repository("manga-llm@sha256:0f3a"), image_repository("localhost:5000/team/manga-llm")
    ('manga-llm', 'team/manga-llm')
    """
    first, sep, rest = image.partition("/")
    # Docker's rule: the first component is a registry when it has a dot or a port, or is localhost.
    path = rest if sep and ("." in first or ":" in first or first == "localhost") else image
    return re.split(r"[:@]", path, maxsplit=1)[0]


def model_folder(tiny: TinyModel, dest: Path, adapters: Mapping[str, Path] | None = None) -> Path:
    """Lay out ``dest`` as SageMaker's ``/opt/ml/model``: the base model's files, and ``adapters/<name>/``.

    Parameters
    ----------
    tiny
        The generated model (:func:`devtools.tiny_model.ensure_tiny_model`); its base model and
        adapters live in separate folders.
    dest
        The folder to (re)create; its entries are symlinks to ``tiny``'s files.
    adapters
        Adapter name -> folder (default: the tiny model's three). A name decides the folder in the
        model, so ``{"manga_domain_v2": tiny.adapters["manga_domain"]}`` copies one under a new name.
    """
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "adapters").mkdir(parents=True)
    for item in sorted(tiny.model_dir.iterdir()):
        (dest / item.name).symlink_to(item.resolve())
    for name, path in sorted((tiny.adapters if adapters is None else adapters).items()):
        (dest / "adapters" / name).symlink_to(Path(path).resolve(), target_is_directory=True)
    return dest


def package_model(tiny: TinyModel, out: Path, adapters: Mapping[str, Path] | None = None) -> Path:
    """Write ``out``, a ``model.tar.gz`` as SageMaker unpacks it into ``/opt/ml/model`` (see :func:`model_folder`),
    packed as an ML engineer packs one: by ``fleetctl model package``'s packer."""
    from fleetctl.model_package import write_tarball

    folder = model_folder(tiny, out.with_name(out.name + ".folder"), adapters)
    files = out.with_name(out.name + ".files")
    shutil.rmtree(files, ignore_errors=True)
    shutil.copytree(folder, files)  # the files themselves: the packer packs a link as a link, which the gate refuses
    out.parent.mkdir(parents=True, exist_ok=True)
    write_tarball(files, out)
    shutil.rmtree(folder)
    shutil.rmtree(files)
    return out


def make_adapter(tiny: TinyModel, name: str, seed: int, root: Path | None = None) -> Path:
    """Generate one more LoRA adapter for the tiny model, compatible with its three (rank, targets), from ``seed``.

    Another seed gives other weights, so answers through it differ. Cached under ``root`` (default
    ``<tiny.root>/extra-adapters``, rebuilt with the tiny model) as ``<name>-seed<seed>``; takes a few
    seconds the first time (torch and peft load the base model).
    """
    from devtools.tiny_model import build_lock

    out = (root or tiny.root / "extra-adapters") / f"{name}-seed{seed}"
    marker = out / ".complete"
    if marker.exists() and marker.read_text() == VERSION:
        return out
    with build_lock(out):
        if not (marker.exists() and marker.read_text() == VERSION):  # another process may have made it meanwhile
            _write_extra_adapter(tiny, out, seed)
    return out


def _write_extra_adapter(tiny: TinyModel, out: Path, seed: int) -> None:
    from devtools.tiny_model import _write_adapter

    scratch = out.with_name(out.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    _write_adapter(tiny.model_dir, scratch, seed, LORA_RANK, LORA_TARGETS)
    config_file = scratch / "adapter_config.json"
    config = json.loads(config_file.read_text())
    config["base_model_name_or_path"] = str(tiny.model_dir)  # peft records the scratch path
    config_file.write_text(json.dumps(config, indent=2))
    (scratch / ".complete").write_text(VERSION)
    shutil.rmtree(out, ignore_errors=True)
    scratch.rename(out)


def upload_model(
    tiny: TinyModel, s3_url: str, workdir: Path, adapters: Mapping[str, Path] | None = None, region: str | None = None
) -> str:
    """Package the tiny model (with ``adapters``, see :func:`model_folder`) and put it at ``s3_url``.

    The bucket must exist. Returns ``s3_url``, ready to be a model's ``ModelDataUrl``.
    """
    bucket, key = split_s3_url(s3_url)
    name = hashlib.sha256(s3_url.encode()).hexdigest()[:16]
    out = package_model(tiny, workdir / "uploads" / f"{name}.tar.gz", adapters)
    boto3.client("s3", region_name=region).upload_file(str(out), bucket, key)
    out.unlink()
    return s3_url


class _ArtifactCache:
    """``ModelDataUrl`` -> unpacked folder, downloaded once per URL and ETag (a re-uploaded object is fetched again)."""

    def __init__(self, root: Path, endpoint_url: str | None) -> None:
        self.root = root
        self.endpoint_url = endpoint_url
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def fetch(self, url: str, region: str) -> Path:
        bucket, key = split_s3_url(url)
        s3 = boto3.client("s3", region_name=region, endpoint_url=self.endpoint_url)
        etag = s3.head_object(Bucket=bucket, Key=key)["ETag"]
        digest = hashlib.sha256(f"{url}\n{etag}".encode()).hexdigest()[:16]
        target, marker = self.root / digest, self.root / f"{digest}.complete"
        with self._lock:
            lock = self._locks.setdefault(digest, threading.Lock())
        with lock:  # two variants of one artifact unpack it once
            if marker.exists():
                return target
            scratch, archive = self.root / f"{digest}.partial", self.root / f"{digest}.tar.gz"
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            s3.download_file(bucket, key, str(archive))
            with tarfile.open(archive) as tar:
                tar.extractall(scratch, filter="data")
            archive.unlink()
            shutil.rmtree(target, ignore_errors=True)
            scratch.rename(target)
            marker.touch()
        return target


# ---------------------------------------------------------------- containers
@dataclass(eq=False)
class Container:
    """One production variant's container: a ``python -m gateway serve`` process for all its instances.

    ``environment`` is the model's ``Environment`` as given; ``process_env`` the process's whole
    environment. ``stdout_path``/``stderr_path`` hold its output; the same lines go to CloudWatch Logs
    (``log_group``, ``log_stream``).
    """

    endpoint_name: str
    endpoint_arn: str
    variant_name: str
    model_name: str
    image: str
    model_data_url: str | None
    environment: dict[str, str]
    instance_type: str | None
    region: str
    instance_id: str
    port: int
    engine_port: int
    log_dir: Path
    health_deadline: float
    model_dir: Path | None = None
    process: Process | None = None
    process_env: dict[str, str] = field(default_factory=dict)
    cpu: int | None = None
    healthy_at: float | None = None
    failure: str | None = None
    stopping: bool = False
    _log_offsets: dict[str, int] = field(default_factory=dict, repr=False)
    _log_partial: dict[str, bytes] = field(default_factory=dict, repr=False)
    _logs_done: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def name(self) -> str:
        return f"{self.endpoint_name}-{self.variant_name}-{self.instance_id}"

    @property
    def stdout_path(self) -> Path:
        return self.log_dir / f"{self.name}.stdout"

    @property
    def stderr_path(self) -> Path:
        return self.log_dir / f"{self.name}.stderr"

    @property
    def log_group(self) -> str:
        return f"/aws/sagemaker/Endpoints/{self.endpoint_name}"

    @property
    def log_stream(self) -> str:
        return f"{self.variant_name}/{self.instance_id}"

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.popen.poll()

    @property
    def state(self) -> ContainerState:
        if self.failure is not None:
            return "failed"
        if self.process is None:
            return "stopped" if self.stopping else "provisioning"
        if not self.alive():
            return "stopped" if self.stopping else "failed"
        if self.stopping:
            return "stopping"
        return "healthy" if self.healthy_at is not None else "starting"

    def stderr_tail(self, max_chars: int = 600) -> str:
        """The last stderr lines, at most ``max_chars`` characters of them."""
        with contextlib.suppress(OSError):
            lines = self.stderr_path.read_text(errors="replace").rstrip().splitlines()
            tail: list[str] = []
            for line in reversed(lines):
                if sum(len(t) + 1 for t in tail) + len(line) > max_chars:
                    break
                tail.insert(0, line)
            return "\n".join(tail)
        return ""

    def _spec_key(self) -> tuple[Any, ...]:
        return (self.model_name, self.image, self.model_data_url, sorted(self.environment.items()), self.instance_type)


def _container_definition(model: Any) -> dict[str, Any] | None:
    """The model's single container (``PrimaryContainer``, or a one-element ``Containers``)."""
    if model is None:
        return None
    primary = getattr(model, "primary_container", None) or {}
    if primary:
        return dict(primary)
    containers = getattr(model, "containers", None) or []
    return dict(containers[0]) if len(containers) == 1 else None


@dataclass(eq=False)
class _Fleet:
    """The containers of one endpoint: what serves now, and what a pending change started."""

    endpoint: FakeEndpoint
    backend: SageMakerModelBackend
    serving: dict[str, Container] = field(default_factory=dict)
    pending: _Launch | None = None


class _Launch:
    """What one CreateEndpoint/UpdateEndpoint started (:class:`sagemaker.Launch`)."""

    def __init__(self, host: LocalSageMaker, fleet: _Fleet, plan: dict[str, Container], new: list[Container]) -> None:
        self.host, self.fleet, self.plan, self.new = host, fleet, plan, new

    def status(self) -> tuple[sagemaker.LaunchState, str]:
        now = time.monotonic()
        for container in self.new:
            if container.failure is not None:
                return "failed", container.failure
            why = None
            if container.process is not None and not container.alive():
                why = f"the container exited with code {container.exit_code()}"
            elif container.healthy_at is None and now > container.health_deadline:
                why = f"no /ping 200 within {self.host.health_timeout_s:g} s"
            if why is not None:
                return "failed", self.host.health_failure(container, why)
        if all(container.healthy_at is not None for container in self.new):
            return "healthy", ""
        return "starting", ""

    def commit(self) -> None:
        self.host._commit(self)

    def abort(self) -> None:
        self.host._abort(self)


class LocalSageMaker:
    """The hosting behind :func:`hosting`: starts, watches and stops the containers, ships their logs.

    Parameters
    ----------
    workdir
        Where unpacked artifacts (``artifacts/``), container output (``containers/``) and written
        configs live.
    image_repository
        Models whose image is in this repository run; others are left to the plain emulator.
    health_timeout_s
        How long a new container may take to answer ``/ping`` 200 (its artifact download included).
    metrics_interval_s
        ``METRICS_INTERVAL_S`` under the model's environment (the image's default is 60 s).
    host_env
        More variables under the model's environment (the model's own win).
    gateway_overrides
        Per-section overrides of the image's ``gateway.yaml``, on top of the CPU engine's flags
        (``supervisor.extra_args``); ``GATEWAY_CONFIG`` under the model's environment names the file.
    image_model
        The folder the image bakes into ``/opt/ml/model``, for models without ``ModelDataUrl``.
    log_interval_s
        How often the log tailer ships new lines.
    stop_timeout_s
        SIGTERM to SIGKILL (SageMaker waits about 30 s; the gateway drains for up to 20 s).
    """

    def __init__(
        self,
        workdir: Path,
        *,
        image_repository: str = IMAGE_REPOSITORY,
        health_timeout_s: float = 300.0,
        metrics_interval_s: float = 5.0,
        host_env: Mapping[str, str] | None = None,
        gateway_overrides: dict[str, dict[str, Any]] | None = None,
        image_model: Path | None = None,
        log_interval_s: float = 0.5,
        stop_timeout_s: float = 40.0,
    ) -> None:
        self.workdir = Path(workdir).resolve()
        self.image_repository = image_repository
        self.health_timeout_s = health_timeout_s
        self.image_model = image_model
        self.log_interval_s = log_interval_s
        self.stop_timeout_s = stop_timeout_s
        # The image's gateway.yaml with the CPU engine's flags (devtools.local_serving.CPU_ENGINE_ARGS).
        overrides: dict[str, dict[str, Any]] = {"supervisor": {"extra_args": list(CPU_ENGINE_ARGS)}}
        for section, values in (gateway_overrides or {}).items():
            overrides[section] = {**overrides.get(section, {}), **values}
        self.host_env: dict[str, str] = {
            "GATEWAY_CONFIG": str(write_config(self.workdir / "gateway.yaml", overrides)),
            "METRICS_INTERVAL_S": f"{metrics_interval_s:g}",
            **(host_env or {}),
        }
        self.endpoint_url = os.environ.get("AWS_ENDPOINT_URL")
        self._artifacts = _ArtifactCache(self.workdir / "artifacts", self.endpoint_url)
        self._logs = _LogShipper(self.endpoint_url)
        self._lock = threading.RLock()
        self._fleets: dict[str, _Fleet] = {}
        self._containers: list[Container] = []
        self._threads: list[threading.Thread] = []
        self._stoppers: list[threading.Thread] = []
        self._closing = threading.Event()

    # ------------------------------------------------------------ what tests ask
    def containers(
        self, endpoint_name: str | None = None, variant_name: str | None = None, *, running_only: bool = True
    ) -> list[Container]:
        """Containers (of an endpoint, of a variant), oldest first; ``running_only``: those whose process is up."""
        with self._lock:
            found = [
                c
                for c in self._containers
                if endpoint_name in (None, c.endpoint_name) and variant_name in (None, c.variant_name)
            ]
        return [c for c in found if c.alive()] if running_only else found

    def serving(self, endpoint_name: str, variant_name: str) -> Container:
        """The container that serves a variant now (the one invocations reach).

        Raises
        ------
        LookupError
            When none does (endpoint unknown here, still creating, or the variant has no container).
        """
        with self._lock:
            for fleet in self._fleets.values():
                if fleet.endpoint.endpoint_name == endpoint_name and variant_name in fleet.serving:
                    return fleet.serving[variant_name]
        raise LookupError(f"no container serves {endpoint_name}/{variant_name}")

    def flush_logs(self) -> None:
        """Ship every complete line written so far now (the tailer does it every ``log_interval_s``)."""
        self._logs.ship(self.containers(running_only=False))

    def health_failure(self, container: Container, why: str) -> str:
        """SageMaker's FailureReason for a container that did not become healthy, with what it said."""
        reason = (
            f"The primary container for production variant {container.variant_name} did not pass the ping "
            f"health check. Please check CloudWatch logs for this endpoint. Local container: {why}; last "
            f"stderr lines: {container.stderr_tail()}"
        )
        return reason[:_MAX_FAILURE_REASON]

    # ------------------------------------------------------------ sagemaker.Hosting
    def hosts(self, endpoint_arn: str) -> bool:
        with self._lock:
            return endpoint_arn in self._fleets

    def serving_url(self, endpoint_arn: str, variant_name: str) -> str | None:
        with self._lock:
            fleet = self._fleets.get(endpoint_arn)
            container = fleet.serving.get(variant_name) if fleet else None
            return container.url if container else None

    def launch(
        self, backend: SageMakerModelBackend, endpoint: FakeEndpoint, config: FakeEndpointConfig
    ) -> _Launch | None:
        arn = str(endpoint.arn)
        with self._lock:
            fleet = self._fleets.get(arn)
            if fleet is not None and fleet.endpoint is not endpoint:  # deleted and created again meanwhile
                self.release(arn)
                fleet = None
            plan: dict[str, Container] = {}
            new: list[Container] = []
            for variant in config.production_variants:
                container = self._plan_variant(backend, endpoint, variant, fleet)
                if container is None:
                    continue
                plan[str(variant["VariantName"])] = container
                if fleet is None or container not in fleet.serving.values():
                    new.append(container)
            if fleet is None and not plan:
                return None
            if fleet is None:
                fleet = self._fleets[arn] = _Fleet(endpoint, backend)
            launch = _Launch(self, fleet, plan, new)
            fleet.pending = launch
            for container in new:
                self._containers.append(container)
                self._start_thread(f"provision-{container.name}", self._provision, container)
            return launch

    def release(self, endpoint_arn: str) -> None:
        with self._lock:
            fleet = self._fleets.pop(endpoint_arn, None)
            if fleet is None:
                return
            doomed = list(fleet.serving.values()) + (fleet.pending.new if fleet.pending else [])
        for container in doomed:
            self._stop_async(container)

    # ------------------------------------------------------------ lifecycle
    def _plan_variant(
        self, backend: SageMakerModelBackend, endpoint: FakeEndpoint, variant: Mapping[str, Any], fleet: _Fleet | None
    ) -> Container | None:
        """The container a variant of the new config runs: the current one if nothing changed, else a new one."""
        model = backend._models.get(variant["ModelName"])
        definition = _container_definition(model)
        if definition is None or image_repository(str(definition.get("Image", ""))) != self.image_repository:
            return None
        name = str(variant["VariantName"])
        candidate = Container(
            endpoint_name=endpoint.endpoint_name,
            endpoint_arn=str(endpoint.arn),
            variant_name=name,
            model_name=str(variant["ModelName"]),
            image=str(definition["Image"]),
            model_data_url=definition.get("ModelDataUrl"),
            environment={str(k): str(v) for k, v in (definition.get("Environment") or {}).items()},
            instance_type=variant.get("InstanceType"),
            region=backend.region_name,
            instance_id=f"i-{secrets.token_hex(9)[:17]}",
            port=0,
            engine_port=0,
            log_dir=self.workdir / "containers",
            health_deadline=time.monotonic() + self.health_timeout_s,
        )
        current = fleet.serving.get(name) if fleet else None
        if current is not None and current._spec_key() == candidate._spec_key() and current.state == "healthy":
            return current
        return candidate

    def _provision(self, container: Container) -> None:
        """Fetch the artifact and start the process (a thread per new container)."""
        try:
            if container.model_data_url:
                model_dir = self._artifacts.fetch(container.model_data_url, container.region)
            else:
                model_dir = self.image_model or self.workdir / "empty-model"
                model_dir.mkdir(parents=True, exist_ok=True)
        except (BotoCoreError, ClientError, OSError, ValueError, ArtifactFetchError, tarfile.TarError) as exc:
            container.failure = (
                f'Failed to download model data for container "container_1" from URL: "{container.model_data_url}". '
                "Please ensure that there is an object located at the URL and that the role passed to "
                f"CreateModel has permissions to download the object. Local error: {exc!r}"
            )[:_MAX_FAILURE_REASON]
            return
        with self._lock:
            if container.stopping:
                return
            container.model_dir = model_dir
            container.port, container.engine_port = free_port(), free_port()
            container.cpu = self._least_used_cpu()
            container.process_env = self._process_env(container)
            command = [sys.executable, "-m", "gateway", "serve"]
            cpus = {container.cpu} if container.cpu is not None else None
            container.process = _spawn(command, container.process_env, container.log_dir, container.name, cpus)

    def _process_env(self, container: Container) -> dict[str, str]:
        inherited = {
            k: v
            for k, v in engine_env(kv_cache_gib=1).items()
            if k not in _GATEWAY_VARIABLES and not k.startswith(ENGINE_KNOB_PREFIX)
        }
        platform = {  # what SageMaker's host decides: /opt/ml/model, the port; here loopback and free ports
            "MODEL_DIR": str(container.model_dir),
            "PORT": str(container.port),
            "SAGEMAKER_BIND_TO_PORT": str(container.port),
            "BIND_HOST": "127.0.0.1",
            "ENGINE_PORT": str(container.engine_port),
        }
        # An instance has CPUs of its own: the container (gateway and engine) runs on a core no other running
        # container has, while there are enough. Unpinned, vLLM binds every engine's compute threads to the same
        # core, and its busy-polling processes (with the worker process it then had: worker and engine core spun
        # while they waited for each other) took both cores of this machine: a starting engine got no CPU at all,
        # and users' requests could not even be sent fast enough to form a queue.
        own_cpu = {"VLLM_CPU_OMP_THREADS_BIND": str(container.cpu)} if container.cpu is not None else {}
        return {**inherited, **own_cpu, **self.host_env, **container.environment, **platform}

    def _least_used_cpu(self) -> int | None:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            return None
        used = [c.cpu for c in self._containers if c.cpu is not None and c.process is not None and c.alive()]
        return min(cpus, key=lambda cpu: (used.count(cpu), cpu))

    def _commit(self, launch: _Launch) -> None:
        with self._lock:
            fleet = launch.fleet
            kept = set(launch.plan.values())
            retired = [c for c in fleet.serving.values() if c not in kept]
            fleet.serving = dict(launch.plan)
            if fleet.pending is launch:
                fleet.pending = None
        for container in retired:
            self._stop_async(container)

    def _abort(self, launch: _Launch) -> None:
        with self._lock:
            if launch.fleet.pending is launch:
                launch.fleet.pending = None
        for container in launch.new:
            self._stop_async(container)

    def _stop_async(self, container: Container) -> None:
        with self._lock:
            if container.stopping:
                return
            container.stopping = True
        thread = threading.Thread(target=self._stop, args=(container,), name=f"stop-{container.name}", daemon=True)
        self._stoppers.append(thread)
        thread.start()

    def _stop(self, container: Container) -> None:
        """SIGTERM (the gateway drains, then stops its engine), SIGKILL after ``stop_timeout_s``."""
        with self._lock:
            process = container.process
        if process is None:
            return
        process.stop(timeout_s=self.stop_timeout_s)
        # The engine runs in its own session; after a SIGKILLed gateway it would outlive it.
        for pid in engine_pids(container.engine_port):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    # ------------------------------------------------------------ background threads
    def _start_thread(self, name: str, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def start(self) -> None:
        """Start the health monitor and the log tailer."""
        self._start_thread("local-sagemaker-monitor", self._monitor)
        self._start_thread("local-sagemaker-logs", self._tail_logs)

    def _monitor(self) -> None:
        with httpx.Client(timeout=2.0) as client:  # SageMaker allows a /ping answer 2 s
            while not self._closing.wait(0.5):
                for container in self.containers():
                    if container.healthy_at is None and not container.stopping:
                        with contextlib.suppress(httpx.HTTPError):
                            if client.get(f"{container.url}/ping").status_code == 200:
                                container.healthy_at = time.monotonic()
                self._settle_fleets()

    def _settle_fleets(self) -> None:
        """Finish pending changes without waiting for a DescribeEndpoint; drop endpoints moto forgot (reset)."""
        with self._lock:
            fleets = list(self._fleets.items())
        for arn, fleet in fleets:
            if fleet.backend.endpoints.get(fleet.endpoint.endpoint_name) is not fleet.endpoint:
                self.release(arn)
            elif getattr(fleet.endpoint, "_fleet_pending", None) is not None:
                sagemaker.settle(fleet.endpoint)

    def _tail_logs(self) -> None:
        while not self._closing.wait(self.log_interval_s):
            self.flush_logs()

    def stop_all(self) -> None:
        """Stop every container (SIGTERM, drain, SIGKILL after ``stop_timeout_s``) and wait for them."""
        with self._lock:
            fleets = list(self._fleets)
            leftovers = [c for c in self._containers if not c.stopping]
        for arn in fleets:
            self.release(arn)
        for container in leftovers:
            self._stop_async(container)
        for thread in list(self._stoppers):
            thread.join(timeout=self.stop_timeout_s + 20)

    def close(self) -> None:
        """Stop the containers, ship their last lines, stop the threads."""
        self.stop_all()
        self._closing.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self.flush_logs()


class _LogShipper:
    """Container output -> CloudWatch Logs, as SageMaker ships it (PutLogEvents over the emulator's HTTP API)."""

    def __init__(self, endpoint_url: str | None) -> None:
        self.endpoint_url = endpoint_url
        self.errors: list[str] = []  # the last few failures to ship, for a test that wonders
        self._clients: dict[str, Any] = {}
        self._streams: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()

    def ship(self, containers: list[Container]) -> None:
        with self._lock:
            now_ms = int(time.time() * 1000)
            for container in containers:
                lines = self._read(container)
                if lines:
                    self._put(container, [{"timestamp": now_ms, "message": line} for line in lines])

    def _read(self, container: Container) -> list[str]:
        """New complete lines of stdout and stderr (and the unterminated last one once the process is gone)."""
        if container.process is None or container._logs_done:
            return []
        exited = not container.alive()  # before reading: then everything it wrote is in the files
        lines: list[str] = []
        for path in (container.stdout_path, container.stderr_path):
            key = path.suffix
            try:
                with path.open("rb") as handle:
                    handle.seek(container._log_offsets.get(key, 0))
                    data = handle.read()
            except OSError:
                continue
            container._log_offsets[key] = container._log_offsets.get(key, 0) + len(data)
            data = container._log_partial.pop(key, b"") + data
            *complete, rest = data.split(b"\n")
            if exited and rest:
                complete.append(rest)
            elif rest:
                container._log_partial[key] = rest
            for raw in complete:
                text = raw.decode("utf-8", "replace").rstrip("\r")
                if text:  # CloudWatch refuses empty messages
                    lines.append(text.encode()[:_MAX_EVENT_BYTES].decode("utf-8", "ignore"))
        if exited:
            container._logs_done = True
        return lines

    def _put(self, container: Container, events: list[dict[str, Any]]) -> None:
        batch: list[dict[str, Any]] = []
        size = 0
        for event in events:
            event_size = len(event["message"].encode()) + 26
            if batch and (len(batch) >= _MAX_EVENTS or size + event_size > _MAX_BATCH_BYTES):
                self._put_batch(container, batch)
                batch, size = [], 0
            batch.append(event)
            size += event_size
        if batch:
            self._put_batch(container, batch)

    def _put_batch(self, container: Container, batch: list[dict[str, Any]]) -> None:
        logs = self._client(container.region)
        key = (container.region, container.log_group, container.log_stream)
        for attempt in range(2):
            try:
                if key not in self._streams:
                    self._create(logs, container.log_group, container.log_stream)
                    self._streams.add(key)
                logs.put_log_events(
                    logGroupName=container.log_group, logStreamName=container.log_stream, logEvents=batch
                )
                return
            except ClientError as exc:
                self._streams.discard(key)  # the emulator was reset: create group and stream again
                if attempt or exc.response["Error"]["Code"] != "ResourceNotFoundException":
                    self.errors = [*self.errors[-9:], repr(exc)]
                    return
            except BotoCoreError as exc:
                self.errors = [*self.errors[-9:], repr(exc)]
                return

    @staticmethod
    def _create(logs: Any, group: str, stream: str) -> None:
        with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
            logs.create_log_group(logGroupName=group)
        with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
            logs.create_log_stream(logGroupName=group, logStreamName=stream)

    def _client(self, region: str) -> Any:
        if region not in self._clients:
            self._clients[region] = boto3.client("logs", region_name=region, endpoint_url=self.endpoint_url)
        return self._clients[region]


@contextlib.contextmanager
def hosting(workdir: Path, **options: Any) -> Iterator[LocalSageMaker]:
    """Run the project's image for emulated endpoints while the block runs (see the module docstring).

    Parameters
    ----------
    workdir
        Where artifacts, container output and configs go.
    **options
        :class:`LocalSageMaker`'s keyword arguments (``image_repository``, ``health_timeout_s``, ...).

    Yields
    ------
    LocalSageMaker
        Ask it which containers run (:meth:`LocalSageMaker.containers`, :meth:`LocalSageMaker.serving`).
        On exit every container is stopped and its last lines shipped.
    """
    emulator_extensions.install()  # the runtime, and the EMF extraction of the lines the containers log
    if sagemaker.hosting is not None:
        raise RuntimeError("a local SageMaker hosting is already active in this process")
    host = LocalSageMaker(workdir, **options)
    host.start()
    sagemaker.hosting = host
    try:
        yield host
    finally:
        sagemaker.hosting = None
        host.close()
