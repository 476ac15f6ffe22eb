"""Run the data plane locally on the CPU: a real vLLM engine and the gateway, as real subprocesses.

Shared by the container tests, the benchmarks and the demo, so all three start things the same way:

    tiny = ensure_tiny_model(".cache/tiny-model")
    with start_engine(tiny) as engine, start_gateway(tiny, engine_url=engine.base_url) as gateway:
        httpx.post(f"{gateway.url}/invocations", json={...})

Everything binds to 127.0.0.1 on free ports; every process is started in its own process group and
killed with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from devtools.emulator import free_port
from devtools.tiny_model import LORA_RANK, TinyModel
from fleetops.model_contract import ENGINE_KNOB_PREFIX, OWNED, EngineKnobs

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = REPO / "gpu_container" / "config" / "gateway.yaml"
PYTHONPATH = os.pathsep.join(str(REPO / p) for p in ("layers/core", "gpu_container", "."))


#: The model contract (:mod:`fleetops.model_contract`) a local gateway runs under, as a rollout would set it.
CONTRACT = {"ENDPOINT_NAME": "manga-chat-local", "VARIANT_NAME": "primary", "MODEL_VERSION": "tiny-llama-test"}

#: ``budget`` overrides for tests that need an answer far longer than the shipped limit (a stream that outlasts
#: a deadline): the other categories give it their room, since all of them must fit ``max_model_len``.
LONG_ANSWER_BUDGET: dict[str, Any] = {"max_tokens_limit": 1600, "max_context_tokens": 400, "history_high_tokens": 1000}

#: The CPU attention kernel defaults to 128-token KV blocks; 32 (its smallest) is closer to the GPU default
#: of 16, so prefix-cache hits are counted at a granularity like production's.
CPU_ENGINE_ARGS = ["--block-size", "32"]

#: The processes of one GPU's engine (world size 1): the API server, and one engine-core process that runs the
#: model itself (vLLM's "uni" executor). Its CPU backend otherwise adds a worker process (the "mp" executor): one
#: more import of vLLM at each start (measured: 26 s to /health instead of 18 s, pinned to one busy core) and a
#: second process polling the first. The API server still starts the engine core apart (AsyncLLM always does).
CPU_ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


class ServingError(RuntimeError):
    """A local engine or gateway did not come up."""


@dataclass
class Process:
    """A subprocess in its own process group, with its output in files."""

    popen: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM, wait, then SIGKILL the whole group; returns the exit code."""
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill_group()
                self.popen.wait(timeout=10)
        self.kill_group()  # leftovers (engine workers)
        return self.popen.returncode


def _spawn(command: list[str], env: dict[str, str], logs: Path, name: str, cpus: set[int] | None = None) -> Process:
    """Start ``command`` in its own session; ``cpus`` pins it (and every process and thread it starts)."""
    logs.mkdir(parents=True, exist_ok=True)
    out, err = logs / f"{name}.stdout", logs / f"{name}.stderr"
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    with out.open("wb") as stdout, err.open("wb") as stderr:
        popen = subprocess.Popen(
            command, env=env, stdout=stdout, stderr=stderr, start_new_session=True,
            preexec_fn=pin,  # noqa: PLW1509 - one syscall between fork and exec, no locks taken
        )  # fmt: skip
    return Process(popen, out, err)


@dataclass
class EngineHandle:
    base_url: str
    port: int
    model_dir: Path
    adapters: dict[str, Path]
    process: Process


def engine_env(kv_cache_gib: int | None = 1) -> dict[str, str]:
    """Environment for a CPU engine: ``kv_cache_gib`` GiB of KV cache (``None``: leave it to vLLM flags)."""
    env = {k: v for k, v in os.environ.items() if k != "VLLM_CPU_KVCACHE_SPACE"}
    if kv_cache_gib is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(kv_cache_gib)  # whole GiB; it overrides --kv-cache-memory-bytes
    # No model hub here: offline, so a broken model directory fails at once instead of retrying downloads.
    return {
        **env,
        "PYTHONPATH": PYTHONPATH,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        **CPU_ENGINE_ENV,
    }


def wait_http(url: str, timeout_s: float, process: Process | None = None, status: int = 200) -> None:
    """Poll ``url`` until it answers ``status``; fail early when ``process`` died."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and not process.alive():
            raise ServingError(f"process exited with {process.popen.returncode}: {process.stderr()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2.0).status_code == status:
                return
        time.sleep(0.5)
    raise ServingError(f"{url} did not answer {status} within {timeout_s:g} s")


@contextlib.contextmanager
def start_engine(
    tiny: TinyModel,
    logs: Path | None = None,
    kv_cache_gib: int = 1,
    kv_cache_bytes: int | None = None,
    max_model_len: int | None = None,
    extra_args: list[str] | None = None,
    timeout_s: float = 300.0,
    cpus: set[int] | None = None,
) -> Iterator[EngineHandle]:
    """Start one real vLLM OpenAI server on the CPU with the tiny model and its three adapters.

    ``kv_cache_bytes`` sets a deliberately small KV cache (``--kv-cache-memory-bytes``) instead of
    ``kv_cache_gib``. ``max_model_len`` defaults to ``gateway.yaml``'s (what an attached gateway budgets for).
    ``cpus`` pins the engine, its compute threads included, to those CPUs.
    """
    from gateway.supervisor import engine_command

    port = free_port()
    command = engine_command(
        tiny.model_dir,
        dict(tiny.adapters),
        lora_rank=LORA_RANK,
        knobs=EngineKnobs(max_model_len=max_model_len or default_max_model_len()),
        host="127.0.0.1",
        port=port,
        extra_args=[
            *CPU_ENGINE_ARGS,
            *(extra_args or []),
            *(["--kv-cache-memory-bytes", str(kv_cache_bytes)] if kv_cache_bytes else []),
        ],
    )
    env = engine_env(None if kv_cache_bytes else kv_cache_gib)
    if cpus:  # vLLM binds its OpenMP threads itself ("auto": every core of the NUMA node) unless told
        env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, sorted(cpus)))
    process = _spawn(command, env, logs or tiny.root / "logs", f"engine-{port}", cpus)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", timeout_s, process)
        yield EngineHandle(f"http://127.0.0.1:{port}", port, tiny.model_dir, dict(tiny.adapters), process)
    finally:
        process.stop(timeout_s=15)


@contextlib.contextmanager
def start_standin_engine(
    logs: Path, tokens: int = 16, interval_s: float = 0.05, cpus: set[int] | None = None
) -> Iterator[EngineHandle]:
    """Start :mod:`devtools.standin_engine` (a fast stand-in for vLLM's server, no model) on a free loopback port.

    It answers ``min(max_tokens, tokens)`` tokens, streamed ``interval_s`` apart; ``cpus`` pins it. The handle's
    ``model_dir`` and ``adapters`` are empty: the stand-in serves none.
    """
    port = free_port()
    command = [
        sys.executable, "-m", "devtools.standin_engine",
        "--port", str(port), "--tokens", str(tokens), "--interval-s", f"{interval_s:g}",
    ]  # fmt: skip
    process = _spawn(command, {**os.environ, "PYTHONPATH": PYTHONPATH}, logs, f"standin-{port}", cpus)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", 60, process)
        yield EngineHandle(f"http://127.0.0.1:{port}", port, Path(), {}, process)
    finally:
        process.stop(timeout_s=10)


def default_max_model_len() -> int:
    """``engine.max_model_len`` of the shipped ``gateway.yaml`` (what a gateway with the default config budgets for)."""
    return int(yaml.safe_load(DEFAULT_CONFIG.read_text())["engine"]["max_model_len"])


def engine_pids(port: int) -> list[int]:
    """Pids of vLLM API servers listening on ``port`` (found through /proc, Linux)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            args = (proc / "cmdline").read_bytes().split(b"\0")
            if b"vllm.entrypoints.openai.api_server" in args and str(port).encode() in args:
                pids.append(int(proc.name))
    return pids


@dataclass
class GatewayHandle:
    url: str
    port: int
    engine_port: int | None
    process: Process
    config_path: Path
    env: dict[str, str] = field(default_factory=dict)

    def ping(self) -> int:
        try:
            return httpx.get(f"{self.url}/ping", timeout=2.0).status_code
        except httpx.HTTPError:
            return 0

    def emf_lines(self) -> list[dict[str, Any]]:
        """The EMF JSON lines the gateway printed on stdout so far."""
        lines = []
        for line in self.process.stdout().splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict) and "_aws" in record:
                    lines.append(record)
        return lines

    def metric_total(self, name: str) -> float:
        """Sum of a counter over every EMF line with the endpoint/variant totals so far (the per-adapter lines and
        the engine-death lines count the same things again under their ``Adapter`` or ``Cause`` dimension, metrics
        of their own in CloudWatch)."""
        totals = ["EndpointName", "VariantName"]
        lines = [r for r in self.emf_lines() if totals in r["_aws"]["CloudWatchMetrics"][0]["Dimensions"]]
        return sum(float(r.get(name, 0) or 0) for r in lines if not isinstance(r.get(name), list))


def write_config(path: Path, overrides: dict[str, dict[str, Any]] | None = None) -> Path:
    """Write a gateway.yaml: the shipped one with per-section overrides."""
    config = yaml.safe_load(DEFAULT_CONFIG.read_text())
    for section, values in (overrides or {}).items():
        config.setdefault(section, {}).update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    return path


@contextlib.contextmanager
def start_gateway(
    tiny: TinyModel,
    workdir: Path,
    engine_url: str | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
    env: dict[str, str] | None = None,
    model_dir: Path | None = None,
    adapters_dir: Path | None = None,
    wait_ready_s: float | None = 300.0,
    name: str = "gateway",
    engine_kv_cache_gib: int | None = 1,
    cpus: set[int] | None = None,
) -> Iterator[GatewayHandle]:
    """Start ``python -m gateway serve`` (the container's entrypoint) on a free loopback port.

    With ``engine_url`` it attaches to a running engine; without, it starts and supervises its own.
    The model's contract is set as a rollout sets it (:data:`CONTRACT`: endpoint, variant, version);
    ``env`` adds to or replaces it, e.g. ``LORA_MODULES`` or ``SM_VLLM_MAX_NUM_SEQS`` for a supervised
    engine. ``wait_ready_s`` waits for ``/ping`` 200 (``None``: return as soon as it listens).
    ``engine_kv_cache_gib`` ``None`` leaves the supervised engine's KV cache to ``supervisor.extra_args``.
    ``cpus`` pins the gateway process to those CPUs.
    """
    port = free_port()
    engine_port = None if engine_url else free_port()
    config_path = write_config(workdir / f"{name}-{port}.yaml", overrides)
    # The model's knobs and adapters come from ``env`` only, never from the shell that runs the tests.
    inherited = {k: v for k, v in engine_env(engine_kv_cache_gib).items() if k not in OWNED}
    gateway_env = {
        **{k: v for k, v in inherited.items() if not k.startswith(ENGINE_KNOB_PREFIX)},
        "GATEWAY_CONFIG": str(config_path),
        "MODEL_DIR": str(model_dir or tiny.model_dir),
        "ADAPTERS_DIR": str(adapters_dir or tiny.adapters_dir),
        "PORT": str(port),
        "BIND_HOST": "127.0.0.1",
        **CONTRACT,
        "METRICS_INTERVAL_S": "2",
        **({"ENGINE_URL": engine_url} if engine_url else {"ENGINE_PORT": str(engine_port)}),
        **(env or {}),
    }
    process = _spawn([sys.executable, "-m", "gateway", "serve"], gateway_env, workdir, f"{name}-{port}", cpus)
    handle = GatewayHandle(f"http://127.0.0.1:{port}", port, engine_port, process, config_path, gateway_env)
    try:
        if wait_ready_s is not None:
            wait_http(f"{handle.url}/ping", wait_ready_s, process)
        else:
            deadline = time.monotonic() + 60
            while handle.ping() == 0 and process.alive() and time.monotonic() < deadline:
                time.sleep(0.1)
        yield handle
    finally:
        process.stop(timeout_s=40)


def engine_totals(base_url: str) -> defaultdict[str, float]:
    """A vLLM server's ``/metrics``: each sample name's value summed over its label sets (0 when absent)."""
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    totals: defaultdict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] += sample.value
    return totals


def sse_data(text: str) -> list[str]:
    """The ``data:`` payloads of a server-sent-event body, in order.

    Lines end at ``\\n`` only (SSE's own rule, after dropping a ``\\r``): ``str.splitlines`` would also split
    inside a JSON event at a generated U+2028 or U+0085, which a model may well emit.
    """
    lines = (line.removesuffix("\r") for line in text.split("\n"))
    return [line[len("data: ") :] for line in lines if line.startswith("data: ")]
