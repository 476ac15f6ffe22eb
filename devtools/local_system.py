"""The whole system on one machine: the control plane drives the real container and sees what it emits.

What runs, all in this process or as its subprocesses, reached over HTTP as AWS would be:

- the emulated account (moto server + :mod:`devtools.emulator_extensions`);
- the rollout and rollback state machines executed from their ASL files, with the real handlers
  (:mod:`devtools.rollout_workflow`);
- the alarm responder with the templates' alarms, evaluated on the emulator, and its EventBridge rule
  (:func:`devtools.alarms.remediation_flow`);
- a local SageMaker that runs the project's container for the endpoint's variants, splits
  ``InvokeEndpoint`` by weight and ships container stdout to CloudWatch Logs, whose EMF lines become
  metrics (:mod:`devtools.local_sagemaker`).

Nothing here writes a CloudWatch datapoint or an alarm event: they come from the gateways' EMF lines.
The endpoint ``manga-chat`` starts with one ``primary`` variant serving ``v1`` on the tiny CPU model; the
first model is created the way the rollout creates models (:class:`fleetops.model_contract.ModelContract`).
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any

import boto3
from botocore.config import Config

from devtools import emulator_extensions
from devtools import rollout_workflow as wf
from devtools.alarms import RemediationFlow, remediation_flow
from devtools.aws_resources import create_core_resources, create_inbox, create_table
from devtools.background import repeating
from devtools.lambda_dispatch import cold_start_environment
from devtools.local_sagemaker import LocalSageMaker, hosting, make_adapter, package_model
from devtools.remediation_stack import RemediationStack
from devtools.tiny_model import TinyModel, write_broken_tokenizer_model, write_truncated_vocab_model
from fleetops.aws.autoscaling import DIMENSION, resource_id
from fleetops.aws.autoscaling import NAMESPACE as SCALING_NAMESPACE
from fleetops.metrics import NAMESPACE, Dimension, MetricName
from fleetops.model_contract import EngineKnobs, ModelContract
from fleetops.promotion.artifact import checksums
from fleetops.promotion.artifact_s3 import split_s3_url
from fleetops.rollout.checks import load_canary_checks
from fleetops.tables import IDEMPOTENCY_PK, REMEDIATION_STATE_PK

STACK = "manga-llm-fleet"
ENDPOINT = wf.ENDPOINT
PRIMARY = wf.PRIMARY
CANARY = "canary"
IMAGE = wf.IMAGE_REPOSITORY  # the stack's MODEL_IMAGE_REPOSITORY: the only one a rollout may use
BUCKET = wf.ARTIFACT_BUCKET  # the stack's MODEL_ARTIFACT_BUCKET
#: The local stack's canary checks: the shipped ones, sized for a CPU engine's trickle of traffic and its noisy
#: latency. Deployed (CANARY_CHECKS_PATH) for both the analysis and Validate, as a stack's own file would be:
#: a rollout request may still only tighten them. The absolute gates are the GPU fleet's SLOs: the tiny CPU model
#: answers in seconds, so they get the gateway's longest request deadline (60 s), and a few requests make one
#: error a large rate, so the error rate keeps the 2 % these scenarios were sized with. No data still never passes.
#: The relative limits allow 6 times the baseline (an increase of 500 %): a few requests on a canary that shares
#: two cores with the primary, the workflows and the users saw its TTFT p95 at 4 times the primary's, nothing wrong.
LOCAL_CHECK_LIMITS = {
    "requests": 5.0,
    "p95-latency": 5.0,
    "p95-ttft": 5.0,
    "error-rate": 0.02,
    "latency-slo": 60000.0,
    "ttft-slo": 60000.0,
}
#: The stack's MaxNumSeqs: small, so real load on the CPU engine queues (and the saturation alarm means it).
MAX_NUM_SEQS = 4
#: Emulated time runs this much faster than the clock, for the alarms and for the metrics they read alike: a 60 s
#: alarm period is a 3 s window, and the gateways emit every 60 / TIME_SCALE = 3 s instead of the image's 60 s, so a
#: period holds as many datapoints as on AWS. What the control plane does on an alarm runs at the clock's speed.
TIME_SCALE = 20.0
#: The container image's ``METRICS_INTERVAL_S`` (``gateway.config.Environment``'s default), compressed by the scale.
IMAGE_METRICS_INTERVAL_S = 60.0


def fleet_yaml(pre_traffic_gates: bool) -> str:
    """The local stack's ``fleet.yaml``: test-sized rollout floors for its dev endpoint.

    As devtools/workflow_fleet.yaml: the rollout workflow and the responder share this stack's fleet.yaml, and a
    dev policy left out would get the strict prod-like defaults. ``pre_traffic_gates``: the shipped fleet runs
    them; a scenario about what happens once a model reaches users switches them off to get it there.
    """
    return f"""
version: local-system
rollout_policy:
  dev: {{approval_steps: [], min_bake_seconds: 1, max_bake_seconds: 600, max_approval_timeout_seconds: 3600,
        max_approval_heartbeat_seconds: 3600, max_extensions: 3, pre_traffic_gates: {str(pre_traffic_gates).lower()},
        max_shadow_sampling_percent: 100}}
endpoints:
  - name: {ENDPOINT}
    environment: dev
    variants:
      - {{name: {PRIMARY}, role: primary, capacity_rps_per_instance: 4, baseline_rps: 2, floor: 1, cap: 12}}
      - {{name: {CANARY}, role: canary, capacity_rps_per_instance: 4, baseline_rps: 1, floor: 1, cap: 2}}
    # Up to the primary's cap: users queueing on a small primary make the responder raise it (and Application
    # Auto Scaling scale it) during a rollout, and a step sized on that primary must still fit. One local process
    # stands for all of a variant's instances, so the count is bookkeeping here.
    canary_limits: {{max_instance_count: 12}}
"""


@dataclass
class Answer:
    """One ``InvokeEndpoint`` as a user saw it."""

    status: int  # 200, or the container's status behind a ModelError
    variant: str
    body: dict[str, Any]
    sent_at: float
    error: str = ""

    @property
    def version(self) -> str | None:
        return (self.body.get("backend") or {}).get("version")

    @property
    def fallback(self) -> bool:
        return any(c.get("finish_reason") == "fallback" for c in self.body.get("choices", []))

    @property
    def deadline_exceeded(self) -> bool:
        """The gateway's documented answer to a request it could not finish in time (504, before SageMaker's 60 s)."""
        return self.status == 504 and "deadline_exceeded" in self.error

    @property
    def controlled(self) -> bool:
        """A normal answer or the documented fallback: what users may see, even from a broken canary."""
        return self.status == 200 and bool(self.body.get("choices"))


#: How a candidate's export can be broken: ``vocab``, its embedding lost the tokens Japanese text needs (it
#: serves, until a Japanese prompt kills the engine core); ``tokenizer``, its tokenizer.json is cut off halfway.
BREAKAGES = {"vocab": write_truncated_vocab_model, "tokenizer": write_broken_tokenizer_model}


def upload_artifact(
    workdir: Path, tiny: TinyModel, name: str, adapters: dict[str, Path] | None = None, broken: str | None = None
) -> tuple[str, dict[str, str]]:
    """Upload model ``name`` (``model.tar.gz``: the tiny model and ``adapters``) to the emulated S3.

    Returns its URL and the checksums of its parts (:func:`packed_checksums`), as the ML engineer who built it
    computes them for the rollout request. ``broken``: one of :data:`BREAKAGES`.
    """
    url = f"s3://{BUCKET}/models/manga-llama/{name}/model.tar.gz"
    source = tiny
    if broken:
        root = workdir / f"broken-{name}"
        BREAKAGES[broken](tiny.model_dir, root / "model")
        source = replace(tiny, root=root)
    archive = package_model(source, workdir / "uploads" / f"{name}.tar.gz", adapters or dict(tiny.adapters))
    digests = packed_checksums(archive)
    bucket, key = split_s3_url(url)
    boto3.client("s3").upload_file(str(archive), bucket, key)
    archive.unlink()
    return url, digests


def packed_checksums(archive: Path) -> dict[str, str]:
    """Each part's checksum, from the packed files: ``""`` the base model, ``adapters/<name>`` each adapter.

    A part's checksum is ``sha256sum <its files, sorted> | sha256sum`` run in the part's folder
    (:func:`fleetops.promotion.artifact.checksums`), the digest the rollout request carries; the artifact gate
    recomputes it from the files it streams.
    """
    parts: dict[str, dict[str, str]] = {}
    with tarfile.open(archive) as tar:
        for member in tar:
            if not member.isfile():
                continue
            path = PurePosixPath(member.name)
            part = "/".join(path.parts[:2]) if path.parts[0] == "adapters" and len(path.parts) > 2 else ""
            relative = str(path.relative_to(part)) if part else str(path)
            extracted = tar.extractfile(member)
            assert extracted is not None
            parts.setdefault(part, {})[relative] = hashlib.sha256(extracted.read()).hexdigest()
    return {part: checksums(files).digest for part, files in parts.items()}


@dataclass
class LocalSystem:
    """What :func:`local_system` runs, and what tests and the demo ask of it."""

    workdir: Path
    tiny: TinyModel
    workflow: wf.RolloutWorkflow
    flow: RemediationFlow
    host: LocalSageMaker
    artifacts: dict[str, str] = field(default_factory=dict)
    #: model_data_url -> its parts' checksums (:func:`packed_checksums`)
    checksums: dict[str, dict[str, str]] = field(default_factory=dict)
    #: One client for all users' threads (a client per call would make the client side the bottleneck):
    #: no retries, and SageMaker's 60 s invocation limit plus a margin.
    runtime: Any = field(
        default_factory=lambda: boto3.client(
            "sagemaker-runtime",
            config=Config(max_pool_connections=128, read_timeout=70, retries={"mode": "standard", "max_attempts": 1}),
        )
    )

    def invoke(self, question: str, *, target_variant: str | None = None, **fields: Any) -> Answer:
        """Ask the endpoint through the emulated SageMaker runtime, as the store's backend does (thread-safe)."""
        runtime = self.runtime
        body = {"messages": [{"role": "user", "content": question}], "max_tokens": 16, **fields}
        extra = {"TargetVariant": target_variant} if target_variant else {}
        sent = time.monotonic()
        try:
            answer = runtime.invoke_endpoint(
                EndpointName=ENDPOINT, Body=json.dumps(body), ContentType="application/json", **extra
            )
        except runtime.exceptions.ModelError as exc:
            status = int(exc.response.get("OriginalStatusCode", 0))
            return Answer(status, "", {}, sent, error=str(exc.response.get("OriginalMessage", exc)))
        except Exception as exc:  # what a user would get: nothing usable
            return Answer(0, "", {}, sent, error=repr(exc))
        return Answer(200, answer.get("InvokedProductionVariant", ""), json.loads(answer["Body"].read()), sent)

    def artifact(self, name: str, adapters: dict[str, Path] | None = None, broken: str | None = None) -> str:
        """Upload a model artifact (``model.tar.gz``) to the emulated S3 and return its URL."""
        url, self.checksums[url] = upload_artifact(self.workdir, self.tiny, name, adapters, broken)
        self.artifacts[name] = url
        return url

    def adapter_entries(self, model_data_url: str, names: Iterable[str], version: str = "v1") -> dict[str, Any]:
        """A rollout request's adapter entries for adapters of the artifact at ``adapters/<name>``, checksummed."""
        digests = self.checksums[model_data_url]
        return {
            name: {"version": version, "path": f"adapters/{name}", "sha256": digests[f"adapters/{name}"]}
            for name in names
        }

    def extra_adapter(self, name: str, seed: int) -> dict[str, Path]:
        """The tiny model's three adapters plus a new one named ``name`` (other weights: other answers)."""
        return {**self.tiny.adapters, name: make_adapter(self.tiny, name, seed)}

    def rollout_request(self, rollout_id: str, version: str, model_data_url: str, **changes: Any) -> dict[str, Any]:
        """A rollout request for this endpoint with test-sized times; ``changes`` override any field."""
        request: dict[str, Any] = {
            "rollout_id": rollout_id,
            "endpoint_name": ENDPOINT,
            "requested_by": "arn:aws:iam::123456789012:user/ayumi",
            "model": {
                "name": "manga-llama",
                "version": version,
                "sha256": self.checksums[model_data_url][""],
                "image_uri": f"{IMAGE}:{version}",
                "model_data_url": model_data_url,
                "execution_role_arn": wf.ROLE,
            },
            "canary": {"instance_type": wf.INSTANCE_TYPE, "instance_count": 1, "variant_name": CANARY},
            "steps": [50, 100],
            "bake_seconds": 6,
            "approval_steps": [],
            "approval": {"timeout_seconds": 600, "heartbeat_seconds": 600},
            "thresholds": {},  # the local stack's checks (LOCAL_CHECK_LIMITS)
            "in_service": {"first_wait_seconds": 2, "max_wait_seconds": 5, "timeout_seconds": 400},
            "max_extensions": 3,
        }
        return request | changes

    def min_capacity(self, variant: str = PRIMARY) -> int:
        targets = boto3.client("application-autoscaling").describe_scalable_targets(
            ServiceNamespace=SCALING_NAMESPACE,
            ResourceIds=[resource_id(ENDPOINT, variant)],
            ScalableDimension=DIMENSION,
        )["ScalableTargets"]
        return int(targets[0]["MinCapacity"])

    def instances(self, variant: str = PRIMARY) -> int | None:
        """The variant's CurrentInstanceCount while the endpoint is in service (``None`` while it updates)."""
        described = boto3.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
        if described["EndpointStatus"] != "InService":
            return None
        found = [v for v in described["ProductionVariants"] if v["VariantName"] == variant]
        return int(found[0]["CurrentInstanceCount"]) if found else None

    def weights(self) -> dict[str, float]:
        described = boto3.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
        return {v["VariantName"]: v.get("CurrentWeight", 0.0) for v in described["ProductionVariants"]}


@contextmanager
def traffic(
    system: LocalSystem, questions: Callable[[int], str], *, every_s: float = 0.2, max_s: float = 600.0
) -> Iterator[list[Answer]]:
    """Users asking the endpoint in the background (bounded in time); yields the answers as they come."""
    with repeating(lambda i: system.invoke(questions(i)), every_s=every_s, max_s=max_s, name="users") as answers:
        yield answers


def aws_equivalent_s(emulated_s: float, real_s: float, time_scale: float = TIME_SCALE) -> float:
    """Seconds on AWS of a span of which ``emulated_s`` ran on emulated time and ``real_s`` at the clock's speed.

    Up to an alarm's event the waits are emulated ones (the metrics interval, the alarm's periods and evaluation):
    ``time_scale`` of them make one AWS second. From the event on (the responder, the workflows, the SageMaker
    calls) nothing is compressed. The few real seconds inside the emulated span (log shipping, a queue forming)
    are scaled too, so the figure errs long; CloudWatch's own ingestion delay is not in it.

    Examples
    --------
    >>> aws_equivalent_s(4.5, 0.5, time_scale=20)
    90.5
    """
    return emulated_s * time_scale + real_s


def emitted(variant: str, metric: MetricName) -> float:
    """Sum of what the gateways of ``variant`` emitted for ``metric`` (read back from CloudWatch).

    The ``[EndpointName, VariantName]`` series only, as CloudWatch matches dimensions: GetMetricData, since moto's
    GetMetricStatistics also counts every series whose dimensions include these (the gateway's per-adapter
    copies of ``Requests``), which CloudWatch does not.
    """
    now = datetime.now(UTC)
    dimensions: Any = [
        {"Name": Dimension.ENDPOINT.value, "Value": ENDPOINT},
        {"Name": Dimension.VARIANT.value, "Value": variant},
    ]
    results = boto3.client("cloudwatch").get_metric_data(
        MetricDataQueries=[
            {
                "Id": "emitted",
                "MetricStat": {
                    "Metric": {"Namespace": NAMESPACE, "MetricName": metric.value, "Dimensions": dimensions},
                    "Period": 86400,
                    "Stat": "Sum",
                },
            }
        ],
        StartTime=now - timedelta(days=1),
        EndTime=now + timedelta(hours=1),
    )["MetricDataResults"]
    return float(sum(results[0]["Values"]))


def wait_for(what: str, check: Callable[[], Any], timeout_s: float, every_s: float = 0.5) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every_s)
    raise TimeoutError(f"{what}: not within {timeout_s:g} s")


def _initial_endpoint(url: str, max_num_seqs: int) -> None:
    """What the operator deployed before any rollout: one primary variant on v1, registered for scaling."""
    sagemaker = boto3.client("sagemaker")
    contract = ModelContract(
        endpoint_name=ENDPOINT, variant_name=PRIMARY, model_version="v1", engine=EngineKnobs(max_num_seqs=max_num_seqs)
    )
    sagemaker.create_model(
        ModelName=f"{ENDPOINT}-v1-model",
        ExecutionRoleArn=wf.ROLE,
        PrimaryContainer={"Image": f"{IMAGE}:v1", "ModelDataUrl": url, "Environment": contract.environment()},
    )
    variants: Any = [
        {
            "VariantName": PRIMARY,
            "ModelName": f"{ENDPOINT}-v1-model",
            "InstanceType": wf.INSTANCE_TYPE,
            "InitialInstanceCount": 1,
            "InitialVariantWeight": 1.0,
            **wf.hosting(ENDPOINT).variant_fields(),
        }
    ]
    sagemaker.create_endpoint_config(EndpointConfigName=f"{ENDPOINT}-v1-config", ProductionVariants=variants)
    sagemaker.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=f"{ENDPOINT}-v1-config")
    boto3.client("application-autoscaling").register_scalable_target(
        ServiceNamespace=SCALING_NAMESPACE,
        ResourceId=resource_id(ENDPOINT, PRIMARY),
        ScalableDimension=DIMENSION,
        MinCapacity=1,
        MaxCapacity=12,
    )


@contextmanager
def local_system(
    workdir: Path,
    tiny: TinyModel,
    *,
    max_num_seqs: int = MAX_NUM_SEQS,
    time_scale: float = TIME_SCALE,
    pre_traffic_gates: bool = False,
    hosting_options: Mapping[str, Any] | None = None,
) -> Iterator[LocalSystem]:
    """Deploy the whole system on the (freshly reset) emulator and run it for the block.

    ``pre_traffic_gates``: the dev environment's rollout floor of that name (off: a rollout's canary meets
    users without the artifact and candidate gates, which the alarm scenarios need). ``hosting_options``: more
    of :class:`~devtools.local_sagemaker.LocalSageMaker`'s keyword arguments (``host_env``, ``gateway_overrides``).

    Takes a few minutes on the first entry: the primary's container starts a real CPU vLLM engine.
    """
    emulator_extensions.install()
    workdir.mkdir(parents=True, exist_ok=True)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    # As template.yaml's bucket: the artifact gate pins the version it checked, so it refuses an unversioned one.
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    core = create_core_resources(STACK)
    workflow = wf.deploy(core)
    fleet_path = workdir / "fleet.yaml"
    fleet_path.write_text(fleet_yaml(pre_traffic_gates))
    stack = RemediationStack(
        core=core,
        prefix=f"{STACK}-remediation-",
        state_table=create_table(f"{STACK}-remediation-state", REMEDIATION_STATE_PK),
        idempotency_table=create_table(f"{STACK}-idempotency", IDEMPOTENCY_PK),
        inbox_url=create_inbox(core.topic_arn, f"{STACK}-ops-inbox"),
        fleet_path=fleet_path,
        rollback_arn=workflow.rollback_arn,
    )
    parameters = {
        "RemediatedEndpointName": ENDPOINT,
        "PrimaryVariantName": PRIMARY,
        "CanaryVariantName": CANARY,
        "MaxNumSeqs": str(max_num_seqs),
    }
    environment = workflow.environment | {
        "MAX_NUM_SEQS": str(max_num_seqs),  # template.yaml: RolloutValidate
        "CANARY_CHECKS_PATH": str(_local_checks(workdir)),  # the analysis and Validate read the same file
    }
    with ExitStack() as stack_of:
        # The workflows' functions read their settings at import: a cold start with this stack's environment.
        stack_of.enter_context(cold_start_environment(environment, wf.FUNCTIONS.values()))
        host = stack_of.enter_context(
            hosting(
                workdir / "sagemaker",
                metrics_interval_s=IMAGE_METRICS_INTERVAL_S / time_scale,
                health_timeout_s=400.0,
                **(hosting_options or {}),
            )
        )
        v1, v1_checksums = upload_artifact(workdir, tiny, "v1")
        _initial_endpoint(v1, max_num_seqs)
        wait_for("the primary InService", _in_service, timeout_s=420, every_s=2)
        flow = stack_of.enter_context(remediation_flow(stack, STACK, parameters=parameters, time_scale=time_scale))
        stack_of.enter_context(wf.handlers())
        yield LocalSystem(workdir, tiny, workflow, flow, host, artifacts={"v1": v1}, checksums={v1: v1_checksums})


def _local_checks(workdir: Path) -> Path:
    """Write the shipped canary checks with :data:`LOCAL_CHECK_LIMITS` applied; returns the file."""
    checks = load_canary_checks()
    sized = {
        name: check.model_copy(update={"limit": LOCAL_CHECK_LIMITS.get(name, check.limit)})
        for name, check in checks.checks.items()
    }
    path = workdir / "canary_checks.yaml"
    path.write_text(json.dumps(checks.model_copy(update={"checks": sized}).model_dump(mode="json")))  # JSON is YAML
    return path


def _in_service() -> bool:
    return boto3.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)["EndpointStatus"] == "InService"
