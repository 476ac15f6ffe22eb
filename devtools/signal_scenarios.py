"""Three monitoring signals on ONE local system: the SLO's slow burn, an unhealthy GPU, an engine's CUDA OOM.

Every datapoint comes from the EMF lines the real gateways print; the alarms are the templates' and their events
reach the real responder through the template's rule (:mod:`devtools.local_system`). What is not the container
itself, and why:

- **Time.** The alarms run :data:`~devtools.local_system.TIME_SCALE` times faster than on AWS (the evaluator's
  one scale, for every alarm): the slow burn's 6 h and 30 min windows are 18 min and 90 s of the clock, the fast
  burn's 1 h and 5 min are 180 s and 15 s, a 1 min period is 3 s. A window therefore holds 1/20 of the requests it
  would on AWS at the same request rate, and the 6 h one holds the canary's whole life (its bake included).
- **The failing requests** are real: 1 request in 100 of the canary's asks for a long answer
  (:data:`LONG_ANSWER_TOKENS` forced tokens) that the CPU engine cannot finish within the gateway's request deadline,
  and the gateway answers its documented 504 ``deadline_exceeded``, counted in ``RequestErrors``. Sized for the tiny
  CPU model: the deadline (:data:`SIGNAL_DEADLINE_S` instead of the image's 55 s, as the local stack's canary checks
  are sized for it) and the budget that lets a request force that long an answer. The broken ``vocab`` artifact
  cannot give 1 %: the first Japanese prompt kills its engine core, the gateway answers with the fallback until the
  engine has restarted, and the breaker-trips and engine-restarts alarms roll the canary back.
- **The GPU** is the NVML stand-in (:mod:`devtools.nvml_standin`): no GPU here. The gateway's real health monitor
  reads it.
- **The OOM** is a stand-in trace (a CPU engine cannot run out of GPU memory): vLLM's own lines for a CUDA OOM
  written into the engine's output pipe, then the engine's process group killed for real, as
  ``tests/container/test_gateway_supervision.py`` does. The supervisor classifies the exit from them.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import httpx

from devtools import rollout_workflow as wf
from devtools.alarm_evaluator import Transition
from devtools.aws_resources import read_inbox
from devtools.background import repeating
from devtools.emulator_extensions.events_lambda import Delivery
from devtools.local_serving import LONG_ANSWER_BUDGET, engine_pids
from devtools.local_system import (
    CANARY,
    ENDPOINT,
    PRIMARY,
    STACK,
    Answer,
    LocalSystem,
    emitted,
    traffic,
    wait_for,
)
from devtools.nvml_standin import break_gpu, container_env
from devtools.scenarios import english, finished_rollbacks
from fleetops.metrics import MetricName

#: The local gateways' request deadline: a 16-token answer takes well under a second on the CPU engine, a
#: :data:`LONG_ANSWER_TOKENS` one far longer. 4 s, not 8: on a quiet machine the tiny model forced some
#: 1,600-token answers out within 8 s (measured: 10 failures in about 1,600 requests, not 16), so the canary's
#: errors stayed near 0.5 % and the slow burn never came.
SIGNAL_DEADLINE_S = 4.0
LONG_ANSWER_TOKENS = int(LONG_ANSWER_BUDGET["max_tokens_limit"])
#: One request in this many of the canary's asks for the long answer: 1 % errors.
FAILING_EVERY = 100
#: Failing requests the canary answers before the scenario ends: the first trips the slow burn (its windows hold
#: the bake's clean requests too), the second puts the fast burn's 1 h window (180 s) on the 1 % alone.
SUSTAINED_FAILURES = 2
#: After the last failing answer: its EMF line shipped and its windows evaluated (emit 3 s, evaluate every 3 s).
EVALUATED_S = 8.0


def signal_hosting(nvml_state: Path) -> dict[str, Any]:
    """``local_system(hosting_options=...)`` for these scenarios: the NVML stand-in, the deadline, a long answer."""
    return {
        "host_env": container_env(nvml_state),
        "gateway_overrides": {
            "breaker": {"request_deadline_s": SIGNAL_DEADLINE_S},
            "budget": LONG_ANSWER_BUDGET,
            "limits": {"min_tokens": LONG_ANSWER_TOKENS},
        },
    }


def slo_alarm(objective: str, tier: str, variant: str, window: str = "") -> str:
    """A SLO burn-rate alarm's name (``templates/variant_remediation.yaml``: ``SloAlarmNamePrefix``)."""
    middle = f"{tier}-burn-{window}" if window else f"{tier}-burn"
    return f"{STACK}-slo-{objective}-{middle}-{ENDPOINT}-{variant}"


# ------------------------------------------------------------------------------------------ 1. the slow burn


@dataclass
class SlowBurnOutcome:
    rollout_execution: str
    answers: list[Answer]  # the canary's, while 1 in 100 failed
    slow_burn: Transition  # the composite's transition into ALARM
    transitions: list[Transition]  # every alarm's, from the canary's 1 % traffic to the scenario's end
    requests: float  # what the canary's gateway emitted, the bake's requests included
    errors: float
    notified: list[dict[str, Any]]  # CloudWatch's notifications of the slow burn on the operations topic
    seconds: float | None  # the first failing request sent -> the slow burn's evaluation instant (wall clock)


def _canary_question(i: int) -> dict[str, Any]:
    if i % FAILING_EVERY == FAILING_EVERY - 1:
        return {"question": "Tell me the whole story of One Piece", "max_tokens": LONG_ANSWER_TOKENS}
    return {"question": english(i), "max_tokens": 16}


def _ask_canary(system: LocalSystem, i: int) -> Answer:
    q = _canary_question(i)
    tokens = q["max_tokens"]
    extra = {"min_tokens": tokens} if tokens > 16 else {}
    return system.invoke(q["question"], target_variant=CANARY, max_tokens=tokens, **extra)


def _canary_traffic(system: LocalSystem, max_s: float) -> AbstractContextManager[list[Answer]]:
    """The canary's own traffic, one request after another, 1 in :data:`FAILING_EVERY` a long answer."""
    ask = functools.partial(_ask_canary, system)
    return repeating(ask, every_s=0.05, max_s=max_s, join_s=SIGNAL_DEADLINE_S + 30, name="canary-users")


def slow_burn(system: LocalSystem, timeout_s: float = 480.0) -> SlowBurnOutcome:
    """A healthy v2 canary at 50 %, held by its promotion's approval; then the canary's traffic fails 1 in 100.

    The rollout bakes on English traffic (no failure: its analysis passes); once it waits for approval, the canary
    gets requests of which every hundredth ends in the gateway's 504, until :data:`SUSTAINED_FAILURES` have. 1 % is
    above the slow burn's 0.6 % (6x the 0.1 % budget) and below the fast burn's 1.44 % and the error-rate alarm's
    5 % in 3 of 5 minutes. ``transitions`` are every alarm's, from the canary's traffic to the end.
    """
    url = system.artifact("v2")
    request = system.rollout_request("v2", "v2", url, approval_steps=[100])
    with traffic(system, english):
        execution = wf.start_rollout(request)
        wf.approval_link(system.workflow, "approve", execution, timeout_s=600)
    evaluator = system.flow.evaluator
    name = slo_alarm("availability", "slow", CANARY)
    read_inbox(system.flow.stack.inbox_url)  # what came before (the approval's mail, the settling alarms)
    started, started_monotonic = time.time(), time.monotonic()
    with _canary_traffic(system, max_s=timeout_s) as answers:
        transition = evaluator.wait_for(name, "ALARM", after=started, timeout_s=timeout_s)
        wait_for(
            f"{SUSTAINED_FAILURES} failing answers",
            lambda: sum(not a.controlled for a in answers) >= SUSTAINED_FAILURES,
            timeout_s=timeout_s,
        )
        time.sleep(EVALUATED_S)
    failing = [a.sent_at for a in answers if not a.controlled]
    requests = wait_for(  # the last answers' EMF lines ship on the gateway's next metrics interval
        "every answer of the canary's counted",
        lambda: (n := emitted(CANARY, MetricName.REQUESTS)) >= len(answers) and n,
        timeout_s=30,
    )
    errors = emitted(CANARY, MetricName.REQUEST_ERRORS)
    seen: list[dict[str, Any]] = []
    notified = wait_for(
        "the slow burn's notification on the operations topic",
        lambda: [m for m in _alarm_notifications(system, seen) if m.get("AlarmName") == name],
        timeout_s=30,
    )
    return SlowBurnOutcome(
        rollout_execution=execution,
        answers=list(answers),
        slow_burn=transition,
        transitions=[t for t in evaluator.transitions if t.instant >= started],
        requests=requests,
        errors=errors,
        notified=notified,
        seconds=transition.instant - (started + min(failing) - started_monotonic) if failing else None,
    )


def _alarm_notifications(system: LocalSystem, seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """CloudWatch's alarm notifications on the operations topic, added to ``seen`` (the inbox deletes what it reads)."""
    for envelope in read_inbox(system.flow.stack.inbox_url, wait_s=1):
        try:
            message = json.loads(envelope.get("Message", ""))
        except ValueError:
            continue  # the responder's and the workflows' plain-text mails
        if isinstance(message, dict) and "AlarmName" in message:
            seen.append(message)
    return seen


# ------------------------------------------------------------------------------------------ 2. an unhealthy GPU


@dataclass
class GpuOutcome:
    handled: Delivery  # the responder's invocation for the gpu-unhealthy alarm's ALARM
    ping_status: int  # what SageMaker's health check gets from the container afterwards
    healthy_before: float  # GpuHealthy the gateway emitted before (sum of 1s: checks that passed)


def gpu_unhealthy(system: LocalSystem, nvml_state: Path, variant: str = PRIMARY) -> GpuOutcome:
    """``variant``'s GPU reports an uncorrectable ECC error (stand-in NVML): the gateway's next check records
    ``GpuHealthy`` 0 and turns ``/ping`` 503; the template's gpu-unhealthy alarm breaches and reaches the responder."""
    healthy_before = emitted(variant, MetricName.GPU_HEALTHY)
    break_gpu(nvml_state, variant)
    handled = system.flow.handled(system.flow.alarm("gpu-unhealthy", variant), "ALARM", timeout_s=120)
    container = system.host.serving(ENDPOINT, variant)
    return GpuOutcome(handled, httpx.get(f"{container.url}/ping", timeout=5).status_code, healthy_before)


# ------------------------------------------------------------------------------------------ 3. an engine's OOM


@dataclass
class OomOutcome:
    handled: Delivery  # the responder's invocation for the oom alarm's ALARM
    oom_caught: float  # OomCaught the gateway emitted
    death_records: list[dict[str, Any]]  # the gateway's engine_death EMF records
    rollbacks: list[dict[str, Any]] = field(default_factory=list)
    rollout: dict[str, Any] = field(default_factory=dict)


def engine_oom(system: LocalSystem, trace: bytes, rollout_execution: str, variant: str = CANARY) -> OomOutcome:
    """``variant``'s engine dies of a CUDA OOM (stand-in trace, real kill); the supervisor counts ``OomCaught``,
    the template's oom alarm breaches and the responder acts on it (a canary: rollback, which aborts the rollout)."""
    container = system.host.serving(ENDPOINT, variant)
    (engine_pid,) = engine_pids(container.engine_port)
    fd = os.open(f"/proc/{engine_pid}/fd/2", os.O_WRONLY)  # the engine's own output pipe, as its processes write
    try:
        os.write(fd, trace)
    finally:
        os.close(fd)
    wait_for("the trace through the gateway", lambda: b"OutOfMemoryError" in container.stderr_path.read_bytes(), 10)
    os.killpg(engine_pid, signal.SIGKILL)  # the engine and its workers die at once
    handled = system.flow.handled(system.flow.alarm("oom", variant), "ALARM", timeout_s=120)
    oom_caught = wait_for("OomCaught emitted", lambda: emitted(variant, MetricName.OOM_CAUGHT), 30)
    deaths = [
        record
        for line in container.stdout_path.read_text().splitlines()
        if '"engine_death"' in line and (record := json.loads(line)).get("log_type") == "engine_death"
    ]
    outcome = OomOutcome(handled, float(oom_caught), deaths)
    if variant == CANARY:
        sfn = boto3.client("stepfunctions")
        done = finished_rollbacks(system)
        outcome.rollbacks = [dict(sfn.describe_execution(executionArn=e["executionArn"])) for e in done]
        outcome.rollout = wf.wait(rollout_execution, timeout_s=120)
    return outcome
