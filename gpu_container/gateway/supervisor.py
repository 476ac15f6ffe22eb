"""Starts, watches and restarts the vLLM OpenAI server on a loopback port.

The engine is dead when its process exits or ``health_failures_to_restart`` health checks in a row
fail (vLLM's API server can stay up with a dead engine core: then ``/health`` fails). A dead engine is
killed (its whole process group) and started again in place with exponential backoff. After
``max_failed_restarts`` start attempts in a row that never became healthy, the state turns
``failed`` and ``/ping`` answers 503 so SageMaker replaces the instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from fleetops.metrics import MetricName
from fleetops.model_contract import EngineKnobs
from gateway.upstream import ENGINE_KEEPALIVE_S

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from gateway.config import SupervisorConfig
    from gateway.metrics import GatewayMetrics

logger = logging.getLogger(__name__)


class EngineState(StrEnum):
    STARTING = "starting"  # first start, never ready yet
    READY = "ready"
    RESTARTING = "restarting"  # died after having been ready, or a start attempt failed; being restarted
    FAILED = "failed"  # gave up: the instance must be replaced
    STOPPED = "stopped"


def engine_command(
    model_dir: Path,
    adapters: Mapping[str, Path],
    *,
    lora_rank: int | None,
    knobs: EngineKnobs,
    host: str,
    port: int,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The vLLM OpenAI server command line (``python -m``: the ``vllm`` console script is not always there).

    Parameters
    ----------
    model_dir
        The base model folder.
    adapters
        Name -> folder of each LoRA adapter to serve.
    lora_rank
        The adapters' shared rank (``--max-lora-rank``).
    knobs
        The effective engine knobs (``gateway.yaml``'s ``engine`` under the model's ``SM_VLLM_*``);
        they come last, so they win over a flag repeated in ``extra_args``.
    host, port
        Where the engine listens (loopback).
    extra_args
        Further flags (``supervisor.extra_args``).

    Examples
    --------
    >>> command = engine_command(Path("/m"), {}, lora_rank=None, knobs=EngineKnobs(max_model_len=2048, max_num_seqs=8),
    ...                          host="h", port=1, extra_args=["--swap-space", "4"])
    >>> command[1:4]
    ['-m', 'vllm.entrypoints.openai.api_server', '--model']
    >>> command[-6:]
    ['--swap-space', '4', '--max-num-seqs', '8', '--max-model-len', '2048']
    """
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir)]
    command += ["--served-model-name", "base", "--host", host, "--port", str(port)]
    command += ["--enable-prefix-caching", "--disable-uvicorn-access-log"]
    # Each JSON answer then carries the engine's own queue, prefill and decode times ("metrics"): the only
    # per-request source of queue wait and TTFT for an answer that is not streamed (gateway.request_log).
    command += ["--enable-per-request-metrics"]
    if adapters:
        command += ["--enable-lora", "--max-loras", str(len(adapters)), "--max-lora-rank", str(lora_rank or 16)]
        command += ["--lora-modules", *(f"{name}={path}" for name, path in adapters.items())]
    return command + list(extra_args) + knobs.engine_args()


class Engine:
    """What the gateway needs from an engine: its URL, its state, and a way to report a failure seen."""

    base_url: str
    state: EngineState = EngineState.STARTING
    restarts: int = 0

    @property
    def available(self) -> bool:
        return self.state is EngineState.READY

    async def start(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    async def stop(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def report_failure(self) -> None:
        """A request saw the engine fail: check its health now rather than at the next interval."""

    async def wait_available(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.available:
            if self.state in (EngineState.FAILED, EngineState.STOPPED) or time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True


class EngineSupervisor(Engine):
    """Supervises one vLLM server subprocess.

    Parameters
    ----------
    command
        The engine's command line (see :func:`engine_command`).
    base_url
        Where it listens (loopback).
    config
        Health, backoff and restart limits.
    client
        The gateway's pooled HTTP client (used for health checks).
    metrics
        Counts ``EngineRestarts`` (each restart, after a death or a failed start).
    on_ready
        Awaited each time the engine becomes healthy (warm-up).
    env
        Extra environment for the engine.
    """

    def __init__(
        self,
        command: list[str],
        base_url: str,
        config: SupervisorConfig,
        *,
        client: httpx.AsyncClient,
        metrics: GatewayMetrics,
        on_ready: Callable[[], Awaitable[None]] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.command = command
        self.base_url = base_url
        self.config = config
        self.client = client
        self.metrics = metrics
        self.on_ready = on_ready
        keep_alive = {"VLLM_HTTP_TIMEOUT_KEEP_ALIVE": str(ENGINE_KEEPALIVE_S)}  # outlasts the gateway's pool
        self.env = {**keep_alive, **os.environ, **(env or {})}
        self.state = EngineState.STARTING
        self.restarts = 0
        self.failed_starts = 0
        self.process: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None
        self._poke = asyncio.Event()
        self._stopping = False

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="engine-supervisor")

    async def stop(self) -> None:
        self._stopping = True
        self._poke.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._kill()
        self.state = EngineState.STOPPED

    def report_failure(self) -> None:
        self._poke.set()

    async def _run(self) -> None:
        config = self.config
        while not self._stopping:
            await self._spawn()
            if await self._wait_healthy():
                self.failed_starts = 0
                self.state = EngineState.READY
                if self.on_ready is not None:
                    await self.on_ready()
                await self._watch()
                if self._stopping:
                    return
                # Not a breaker trip: BreakerTrips counts engine calls that failed (see InvocationService); a death
                # shows in the EngineRestarts that follows.
                logger.warning("engine died (pid %s); restarting", self._pid())
            else:
                self.failed_starts += 1
                logger.warning("engine start failed (%d in a row)", self.failed_starts)
            await self._kill()
            if self.failed_starts > config.max_failed_restarts:
                self.state = EngineState.FAILED
                logger.error("giving up on the engine; /ping reports unhealthy")
                return
            self.state = EngineState.RESTARTING
            backoff = config.restart_backoff_initial_s * 2 ** max(self.failed_starts - 1, 0)
            await asyncio.sleep(min(backoff, config.restart_backoff_max_s))
            self.restarts += 1
            self.metrics.increment(MetricName.ENGINE_RESTARTS)

    async def _spawn(self) -> None:
        # A new session: the engine's workers share its process group, so one killpg stops them all.
        # Engine logs go to stderr; stdout carries only the gateway's EMF lines.
        self.process = await asyncio.create_subprocess_exec(
            *self.command, env=self.env, stdout=sys.stderr.fileno(), stderr=sys.stderr.fileno(), start_new_session=True
        )

    async def _healthy(self) -> bool:
        try:
            response = await self.client.get(f"{self.base_url}/health", timeout=5.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    def _exited(self) -> bool:
        return self.process is None or self.process.returncode is not None

    async def _wait_healthy(self) -> bool:
        deadline = time.monotonic() + self.config.startup_timeout_s
        while time.monotonic() < deadline and not self._stopping:
            if self._exited():
                return False
            if await self._healthy():
                return True
            await asyncio.sleep(0.5)
        return False

    async def _watch(self) -> None:
        failures = 0
        while not self._stopping:
            if failures == 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._poke.wait(), timeout=self.config.health_interval_s)
                self._poke.clear()
            else:
                await asyncio.sleep(0.2)  # a failed check: confirm quickly rather than at the next interval
            if self._exited():
                return
            failures = 0 if await self._healthy() else failures + 1
            if failures >= self.config.health_failures_to_restart:
                return

    def _pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    async def _kill(self) -> None:
        process = self.process
        if process is None or (process.returncode is not None and not _group_alive(process.pid)):
            return
        # Short waits: after a drain, SageMaker SIGKILLs the container ~30 s after its SIGTERM.
        for sig, wait_s in ((signal.SIGTERM, 4.0), (signal.SIGKILL, 3.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), timeout=wait_s)
                if not _group_alive(process.pid):
                    return
            await asyncio.sleep(0.5)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class ExternalEngine(Engine):
    """An engine the gateway does not own (``ENGINE_URL``): watched, never restarted.

    Used to put several gateways in front of one engine in tests and benchmarks.
    """

    def __init__(
        self,
        base_url: str,
        client: httpx.AsyncClient,
        interval_s: float = 1.0,
        on_ready: Callable[[], Awaitable[None]] | None = None,
        failures_to_down: int = 3,
    ) -> None:
        self.base_url = base_url
        self.client = client
        self.interval_s = interval_s
        self.failures_to_down = failures_to_down
        self.on_ready = on_ready
        self.state = EngineState.STARTING
        self.restarts = 0
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="engine-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.state = EngineState.STOPPED

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                healthy = (await self.client.get(f"{self.base_url}/health", timeout=5.0)).status_code == 200
            except httpx.HTTPError:
                healthy = False
            # One slow answer on a busy host is not an outage: unavailable after a few failures in a row.
            failures = 0 if healthy else failures + 1
            was = self.state
            if healthy:
                self.state = EngineState.READY
            elif failures >= self.failures_to_down:
                self.state = EngineState.RESTARTING
            if healthy and was is not EngineState.READY and self.on_ready is not None:
                await self.on_ready()
            await asyncio.sleep(self.interval_s)
