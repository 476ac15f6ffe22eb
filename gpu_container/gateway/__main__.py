"""Container entrypoint: ``python -m gateway serve`` (SageMaker starts the image with the argument ``serve``).

Start-up checks run before anything listens: the model's contract (:mod:`fleetops.model_contract`) and
the deployment variables, the NVIDIA driver against the image's CUDA (:mod:`gateway.cuda_check`), ``gateway.yaml``,
the budget against the effective engine knobs, the adapters served (present, compatible, every route leading
to one), the tokenizer. A bad image or model fails at
once with exit code 1 and ``gateway: cannot start:`` followed by every problem, one per line. Then the
gateway listens on :8080 while the engine starts in the background; SIGTERM drains (see
:mod:`gateway.app`) and exits 0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING

import httpx
import uvicorn

from gateway.app import Gateway
from gateway.config import Environment, GatewayConfig, GatewayConfigError, GpuHealthConfig, load_gateway_config
from gateway.cuda_check import Decision, Outcome, at_start
from gateway.fallback import BedrockFallback
from gateway.gpu_health import GpuHealthMonitor, NvmlHealthReader
from gateway.heap import YOUNG_THRESHOLD, settle_heap
from gateway.metrics import GatewayMetrics
from gateway.prompt import PromptBuilder
from gateway.routing import (
    AdapterCompatibilityError,
    AdapterInfo,
    Router,
    adapter_source,
    check_adapters,
    routing_for,
    served_adapters,
)
from gateway.serving import InvocationService
from gateway.summary import Summarizer
from gateway.supervisor import Engine, EngineSupervisor, ExternalEngine, engine_command
from gateway.tokens import TokenCounter, TokenizerError
from gateway.upstream import Upstream
from gateway.warmup import warm_up

if TYPE_CHECKING:
    import socket
    from types import FrameType

USAGE = "usage: python -m gateway serve"

# Named, not __name__: run with ``-m`` this module is "__main__", outside the "gateway" logger's tree.
logger = logging.getLogger("gateway.__main__")


def effective_config(env: Environment, config: GatewayConfig) -> tuple[GatewayConfig, dict[str, AdapterInfo]]:
    """``gateway.yaml`` as this model runs it, and the adapters it serves.

    The model's engine knobs go over the file's (the budget is checked against the result), its
    ``LORA_MODULES`` replace ``routing.adapters``; every problem of either kind is collected.

    Raises
    ------
    GatewayConfigError
        Naming every problem: budget vs the effective ``max_model_len``, routes to adapters not served,
        adapters missing or unreadable, adapters that do not share rank and target modules.

    Examples
    --------
    The shipped ``gateway.yaml`` with one route, and a model folder serving one adapter:

    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from gateway.config import DEFAULT_CONFIG, Route, RoutingConfig
    >>> routing = RoutingConfig(adapters=["jp_style"], routes=[Route(locale="ja", adapter="jp_style")])
    >>> config = load_gateway_config(DEFAULT_CONFIG).model_copy(update={"routing": routing})
    >>> with tempfile.TemporaryDirectory() as model_dir:
    ...     adapter = Path(model_dir, "adapters", "jp-v2")
    ...     adapter.mkdir(parents=True)
    ...     _ = (adapter / "adapter_config.json").write_text(json.dumps({"r": 8, "target_modules": ["q_proj"]}))
    ...     contract = {"ENDPOINT_NAME": "e", "VARIANT_NAME": "v", "MODEL_VERSION": "1", "MODEL_DIR": model_dir,
    ...                 "SM_VLLM_MAX_MODEL_LEN": "4096", "LORA_MODULES": "jp_style=adapters/jp-v2"}
    ...     effective, adapters = effective_config(Environment.from_env(contract), config)
    ...     effective_config(Environment.from_env({**contract, "LORA_MODULES": "jp=adapters/jp-v2"}), config)
    Traceback (most recent call last):
    ...
    gateway.config.GatewayConfigError: routing.routes[0] (locale ja) leads to adapter 'jp_style', which ...
    >>> effective.budget.max_model_len, effective.routing.adapters, adapters["jp_style"].rank
    (4096, ['jp_style'], 8)
    """
    problems: list[str] = []
    try:
        config = config.for_model(env.engine)
    except GatewayConfigError as exc:
        problems += exc.problems
    served = served_adapters(env, config.routing)
    try:
        config = config.model_copy(update={"routing": routing_for(config.routing, served, adapter_source(env))})
    except GatewayConfigError as exc:
        problems += exc.problems
    adapters: dict[str, AdapterInfo] = {}
    try:
        adapters = check_adapters(served)
    except AdapterCompatibilityError as exc:
        problems += exc.problems
    if problems:
        raise GatewayConfigError(problems)
    return config, adapters


def build_gateway(env: Environment, config: GatewayConfig) -> Gateway:
    """Check the model and adapters and wire the gateway (raises on anything unusable)."""
    config, adapters = effective_config(env, config)
    knobs = " ".join(config.engine.engine_args())
    logger.info(
        "model %s for %s/%s; adapters %s from %s; engine knobs %s",
        env.model_version,
        env.endpoint_name,
        env.variant_name,
        sorted(adapters) or "none",
        adapter_source(env),
        knobs,
    )
    builder = PromptBuilder(TokenCounter(env.model_dir), config.system_prompt, config.budget)
    builder.check_system_prompt()
    # Pooled clients: aiohttp (C parser) on the hot path, httpx for health checks and warm-up.
    limits = httpx.Limits(max_connections=16, max_keepalive_connections=8)
    client = httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(60.0, connect=2.0))
    upstream = Upstream()
    metrics = GatewayMetrics()
    gateway: Gateway

    async def on_ready() -> None:
        try:
            await warm_up(client, engine.base_url, builder.prefix, list(adapters))
        except httpx.HTTPError as exc:
            logger.error("warm-up failed: %r", exc)
            return
        gateway.state.warmed = True
        logger.info("warm-up done, /ping is healthy")

    engine: Engine
    if env.engine_url:
        engine = ExternalEngine(env.engine_url.rstrip("/"), client, on_ready=on_ready)
    else:
        supervisor = config.supervisor
        port = env.engine_port or supervisor.port
        rank = next(iter(adapters.values())).rank if adapters else None
        command = engine_command(
            env.model_dir,
            {name: info.path for name, info in adapters.items()},
            lora_rank=rank,
            knobs=config.engine,
            host=supervisor.host,
            port=port,
            extra_args=supervisor.extra_args,
        )
        base_url = f"http://{supervisor.host}:{port}"
        engine = EngineSupervisor(command, base_url, supervisor, client=client, metrics=metrics, on_ready=on_ready)
    fallback = BedrockFallback(env.bedrock_model_id) if env.bedrock_model_id else None
    router = Router(config.routing)
    service = InvocationService(
        builder,
        router,
        engine,
        upstream=upstream,
        metrics=metrics,
        containment=config.containment,
        backend_version=env.model_version,
        limits=config.limits,
        fallback_model=fallback,
        summarizer=Summarizer(config.summary, builder, metrics) if config.summary.mode != "off" else None,
    )
    background: list[object] = [_metrics_agent(env, metrics, engine.base_url)]
    gpu_health = _gpu_health(config.gpu_health, metrics)
    if gpu_health is not None:
        background.append(gpu_health)
    gateway = Gateway(config, engine, service, client, upstream, background=background, gpu_health=gpu_health)
    return gateway


def _gpu_health(checks: GpuHealthConfig, metrics: GatewayMetrics) -> GpuHealthMonitor | None:
    if not checks.enabled:
        return None
    try:
        import pynvml
    except ImportError:  # only where nvidia-ml-py is not installed (the image has it): nothing to check with
        logger.info("GPU health not checked: pynvml is not installed")
        return None
    return GpuHealthMonitor(NvmlHealthReader(pynvml), checks, metrics)


def _metrics_agent(env: Environment, metrics: GatewayMetrics, base_url: str) -> object:
    from gateway.metrics import MetricsAgent

    return MetricsAgent(
        recorder=metrics,
        vllm_base_url=base_url,
        endpoint_name=env.endpoint_name,
        variant_name=env.variant_name,
        interval_s=env.metrics_interval_s,
        model_version=env.model_version,
    )


class DrainingServer(uvicorn.Server):
    """uvicorn, except that SIGTERM first drains: 503 for new work, in-flight work finishes, then exit 0."""

    def __init__(self, config: uvicorn.Config, gateway: Gateway, window_s: float) -> None:
        super().__init__(config)
        self.gateway = gateway
        self.window_s = window_s
        self._drain_task: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        frozen = settle_heap()  # the collector's passes skip what start-up built, and come seldom
        logger.info("start-up heap frozen (%d objects), young collection threshold %d", frozen, YOUNG_THRESHOLD)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGTERM and self._drain_task is None and not self.should_exit:
            self.gateway.state.draining = True  # at once: the next request already sees it
            loop = asyncio.get_event_loop()
            loop.call_soon_threadsafe(self._start_drain)
            return
        super().handle_exit(sig, frame)

    def _start_drain(self) -> None:
        self._drain_task = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        in_flight = self.gateway.state.in_flight
        logger.info("SIGTERM, draining %d in flight for up to %g s", in_flight, self.window_s)
        finished = await self.gateway.state.drain(self.window_s)
        left = self.gateway.state.in_flight
        logger.info("drain %s", "complete" if finished else f"window over, {left} cut")
        self.should_exit = True


def cannot_start(exc: Exception) -> int:
    """Log ``gateway: cannot start:`` and then every problem on its own line (stderr); return exit code 1.

    Examples
    --------
    >>> cannot_start(GatewayConfigError(["ENDPOINT_NAME is not set", "SM_VLLM_MAX_NUM_SEQ: unknown engine knob"]))
    1

    logs ``gateway: cannot start:``, ``  - ENDPOINT_NAME is not set``, ``  - SM_VLLM_MAX_NUM_SEQ: ...``.
    """
    problems: list[str] = getattr(exc, "problems", None) or [str(exc)]
    # A problem that spans lines (a YAML parser's message) stays indented under its own dash.
    lines = "".join("\n  - " + "\n    ".join(problem.splitlines()) for problem in problems)
    logger.error("cannot start:%s", lines)
    return 1


def serve(env: Environment) -> int:
    try:
        config = load_gateway_config(env.config_path)
        gateway = build_gateway(env, config)
    except (GatewayConfigError, TokenizerError) as exc:
        return cannot_start(exc)
    port = env.port or config.server.port
    uv_config = uvicorn.Config(
        gateway.build_app(),
        host=env.bind_host,
        port=port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        proxy_headers=False,  # nothing reads the client's address or scheme: no middleware layer on every request
        log_level="warning",
        timeout_keep_alive=75,  # above SageMaker's 60 s keep-alive, so it never hits a closed connection
        timeout_graceful_shutdown=3,  # drain window + 3 s + engine stop (<= 7 s) stays below SIGKILL at ~30 s
    )
    DrainingServer(uv_config, gateway, config.drain.window_s).run()
    return 0


def check_cuda() -> Decision:
    """The driver against the image's CUDA (:mod:`gateway.cuda_check`); may put the compat libraries on
    ``LD_LIBRARY_PATH`` for the engine, which inherits this process's environment."""
    try:
        import pynvml
    except ImportError:  # only where nvidia-ml-py is not installed (the image has it)
        return at_start(os.environ, None)
    return at_start(os.environ, pynvml)


def main(argv: list[str]) -> int:
    if argv[:1] not in (["serve"], []):
        logger.error(USAGE)
        return 2
    try:
        env = Environment.from_env()
    except GatewayConfigError as exc:
        return cannot_start(exc)
    cuda = check_cuda()
    if cuda.outcome is Outcome.REFUSE:
        return cannot_start(GatewayConfigError([cuda.message]))
    return serve(env)


def log_to_stderr() -> None:
    """The gateway's log lines on stderr as ``gateway: <message>`` (stdout carries only EMF).

    Only the ``gateway`` loggers, at INFO: the root logger stays as it was, so libraries keep their own
    level (httpx would log every health check at INFO).
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("gateway: %(message)s"))
    gateway_logger = logging.getLogger("gateway")
    gateway_logger.addHandler(handler)
    gateway_logger.setLevel(logging.INFO)
    gateway_logger.propagate = False


if __name__ == "__main__":
    log_to_stderr()
    sys.exit(main(sys.argv[1:]))
