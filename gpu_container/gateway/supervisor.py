"""Starts, watches and restarts the vLLM OpenAI server on a loopback port.

The engine is dead when its process exits or ``health_failures_to_restart`` health checks in a row
fail (vLLM's API server can stay up with a dead engine core: then ``/health`` fails). A dead engine is
killed (its whole process group) and started again in place with exponential backoff. After
``max_failed_restarts`` start attempts in a row that never became healthy, the state turns
``failed`` and ``/ping`` answers 503 so SageMaker replaces the instance.

Each end the gateway did not ask for (a death while serving, a failed start) is classified from the exit status
and the last lines of the engine's log (:mod:`gateway.engine_log`, :func:`gateway.engine_death.classify_exit`):
``cuda_oom``, ``xid``, ``nccl``, ``killed`` or ``other``. It is logged with the line that decided it, counted in
``EngineDeaths`` (and ``OomCaught`` for an out-of-memory death), and written as its own EMF record with the
``Cause`` dimension; requests that fall back meanwhile carry the cause in the request log.
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

from fleetops.metrics import Dimension, MetricName
from fleetops.model_contract import EngineKnobs
from gateway.engine_death import DeathCause, EngineDeath, classify_exit
from gateway.engine_log import EngineLog
from gateway.upstream import ENGINE_KEEPALIVE_S

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from gateway.config import SupervisorConfig
    from gateway.metrics import GatewayMetrics

logger = logging.getLogger(__name__)

#: A fatal line read this recently explains a request that fails before the death itself is classified.
RECENT_CAUSE_S = 60.0
#: An engine that stopped answering gets this long to exit by itself (vLLM's API server does, soon after its engine
#: core died), so its own exit status is recorded rather than the signal the gateway then sends.
EXIT_GRACE_S = 1.0
#: How long the rest of a dead engine's output may take to arrive (its pipe closes when its last process is gone).
LOG_DRAIN_S = 2.0


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

    def failure_cause(self) -> DeathCause | None:
        """Why the engine is failing requests, where known (its last death, or a fatal line just read)."""
        return None

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
        Counts ``EngineRestarts`` (each restart, after a death or a failed start), ``EngineDeaths`` and
        ``OomCaught`` (each death or failed start, classified), and records each as an event with its ``Cause``.
    on_ready
        Awaited each time the engine becomes healthy (warm-up).
    env
        Extra environment for the engine.
    log
        The engine output's pass-through and tail; ``None`` passes it on to the gateway's stderr.
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
        log: EngineLog | None = None,
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
        self.log = log if log is not None else EngineLog()
        self.last_death: EngineDeath | None = None
        self._task: asyncio.Task[None] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._pipe: asyncio.ReadTransport | None = None
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
        await self._drain_log()
        self.state = EngineState.STOPPED

    def report_failure(self) -> None:
        self._poke.set()

    def failure_cause(self) -> DeathCause | None:
        """The last death's cause while the engine is down; while it runs, the cause of a fatal line it just
        wrote (a request can fail before the supervisor has seen the process end)."""
        if self.state is not EngineState.READY and self.last_death is not None:
            return self.last_death.cause
        return self.log.recent_cause(RECENT_CAUSE_S)

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
                self.state = EngineState.RESTARTING  # at once: requests fall back rather than try a dead engine
                pid = self._pid()
                # Not a breaker trip: BreakerTrips counts engine calls that failed (see InvocationService); a death
                # shows in EngineDeaths and the EngineRestarts that follows.
                death = await self._ended("serving")
                logger.warning("engine died (pid %s): %s; restarting", pid, death.describe())
            else:
                if self._stopping:
                    return
                self.failed_starts += 1
                death = await self._ended("start")
                logger.warning("engine start failed (%d in a row): %s", self.failed_starts, death.describe())
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
        # Engine logs go on to stderr (stdout carries only the gateway's EMF and request lines), through a pipe the
        # gateway reads, so the last lines can say why the engine died. An OS pipe of its own rather than the event
        # loop's PIPE, which uvloop makes a socket pair: a pipe is what the engine's processes and tools expect.
        self.log.reset()
        read_fd, write_fd = os.pipe()
        try:
            self.process = await asyncio.create_subprocess_exec(
                *self.command, env=self.env, stdout=write_fd, stderr=write_fd, start_new_session=True
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)  # the engine holds it now; its pipe closes when its last process is gone
        reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        pipe = os.fdopen(read_fd, "rb", buffering=0)
        self._pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        self._pump = asyncio.create_task(self.log.pump(reader), name="engine-log")

    async def _ended(self, phase: str) -> EngineDeath:
        """The engine ended unasked, or is stopped as unhealthy: stop what is left, read the rest of its output,
        then classify, count and record the end (``phase``: ``serving`` or ``start``)."""
        self.last_death = None  # until this end is classified, a fatal line just read is the best answer
        process = self.process
        if process is not None and process.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), timeout=EXIT_GRACE_S)
        returncode = None if process is None else process.returncode
        await self._kill()
        await self._drain_log()
        death = classify_exit(returncode, self.log.lines())
        self.last_death = death
        self._record(death, phase)
        return death

    def _record(self, death: EngineDeath, phase: str) -> None:
        """Count the end in the totals and as its own record under its ``Cause`` (see :mod:`gateway.metrics`)."""
        counted = [MetricName.ENGINE_DEATHS, *([MetricName.OOM_CAUGHT] if death.is_oom else [])]
        for name in counted:
            self.metrics.increment(name)
        record: dict[str, object] = {"log_type": "engine_death", "cause": str(death.cause), "phase": phase}
        record |= {"exit_status": death.exit_status, "evidence": death.evidence, "pid": self._pid()}
        self.metrics.record_event({str(Dimension.CAUSE): str(death.cause)}, counted, record)

    async def _drain_log(self) -> None:
        """Wait for the engine's pipe to close (bounded: an orphan that kept it open must not hold up a restart)."""
        pump, self._pump = self._pump, None
        pipe, self._pipe = self._pipe, None
        if pump is not None:
            done, _ = await asyncio.wait({pump}, timeout=LOG_DRAIN_S)
            if not done:
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pump
        if pipe is not None:
            pipe.close()

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
