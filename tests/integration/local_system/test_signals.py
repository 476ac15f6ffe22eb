"""Monitoring signals on one deployed system: the SLO's slow burn, an unhealthy GPU, an engine's CUDA OOM.

One system for the module (its CPU engines start once), the tests in file order: the first rolls out a canary and
makes 1 % of its requests fail, the second breaks the primary's GPU, the third kills the canary's engine with an
OOM. Nothing here writes a datapoint or an alarm event: the gateways' EMF lines become the metrics, the templates'
alarms judge them (``TIME_SCALE`` times faster than on AWS: a 30 min window is 90 s), and their events reach the
real responder through the template's rule. STAND-INs (no GPU here): NVML (``devtools/nvml_standin``) and the CUDA
OOM's log lines; the engine's death is a real SIGKILL. What else is sized for the tiny CPU model is in
``devtools/signal_scenarios.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.emulator import MotoServer
from devtools.local_system import CANARY, PRIMARY, LocalSystem, emitted, local_system
from devtools.signal_scenarios import (
    FAILING_EVERY,
    SIGNAL_DEADLINE_S,
    engine_oom,
    gpu_unhealthy,
    signal_hosting,
    slo_alarm,
    slow_burn,
)
from devtools.tiny_model import TinyModel
from fleetops.metrics import MetricName

pytestmark = [pytest.mark.container, pytest.mark.timeout(1200)]

#: STAND-IN for a real CUDA OOM (tests/gpu/test_cuda_oom_gpu.py causes one on a GPU): vLLM's lines for it.
CUDA_OOM_TRACE = Path(__file__).parents[2] / "unit/gateway/data/engine_deaths/cuda_oom_during_decode.log"


@pytest.fixture(scope="module")
def nvml_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("nvml") / "state.json"


@pytest.fixture(scope="module")
def system(
    emulator: MotoServer, tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory, nvml_state: Path
) -> Iterator[LocalSystem]:
    with local_system(
        tmp_path_factory.mktemp("signals") / "system", tiny_model, hosting_options=signal_hosting(nvml_state)
    ) as deployed:
        yield deployed


@pytest.fixture(scope="module")
def shared() -> dict[str, Any]:
    """What a later test needs from an earlier one (the canary's rollout)."""
    return {}


@pytest.mark.slow(reason="rolls out a canary (a second CPU vLLM engine) and runs its traffic until the slow burn")
def test_one_percent_errors_on_a_canary_trip_the_slow_burn_and_nothing_that_pages(
    system: LocalSystem, shared: dict[str, Any]
) -> None:
    outcome = slow_burn(system)
    shared["rollout"] = outcome.rollout_execution

    # Users saw exactly 1 in 100 fail, with the gateway's documented 504; every other answer was a normal one.
    failing = [a for a in outcome.answers if not a.controlled]
    assert failing, "no request failed"
    assert all(a.deadline_exceeded for a in failing), failing[:3]
    assert len(failing) <= len(outcome.answers) // FAILING_EVERY + 1, (len(failing), len(outcome.answers))
    assert all(f"within {SIGNAL_DEADLINE_S:g} s" in a.error for a in failing), failing[0].error
    # The canary's own EMF counted each of those 504s once (and every answer: the scenario waits for that). Its
    # rate over the canary's life is not asserted: the bake's and the last seconds' clean requests dilute the 1 % by
    # however many the machine serves in that time. The alarms' own datapoints below are the rates that count.
    assert outcome.errors == len(failing), (outcome.errors, len(failing))
    # The slow burn's composite went to ALARM on both windows' error rates, each above its 0.6 % threshold.
    assert outcome.slow_burn.state == "ALARM"
    for window in ("6h", "30m"):
        name = slo_alarm("availability", "slow", CANARY, window)
        breaches = [t for t in outcome.transitions if t.alarm_name == name and t.state == "ALARM"]
        assert breaches, f"{name} never breached: {[(t.alarm_name, t.state) for t in outcome.transitions]}"
        data = breaches[0].reason_data
        assert data["threshold"] == 0.6 and data["recentDatapoints"][-1] > 0.6, data
    # It notifies the operations team (CloudWatch's notification on the operations topic) ...
    assert outcome.notified[0]["NewStateValue"] == "ALARM", outcome.notified
    # ... and nothing pages or rolls back: no fast burn, no error-rate alarm (5 % in 3 of 5 minutes).
    alarmed = {t.alarm_name for t in outcome.transitions if t.state == "ALARM"}
    assert slo_alarm("availability", "fast", CANARY) not in alarmed, alarmed
    assert system.flow.alarm("error-rate", CANARY) not in alarmed, alarmed
    assert outcome.seconds is not None
    print(  # the figures, for the README and reviews (pytest -rP)
        f"slow burn: {outcome.errors:g} errors in {outcome.requests:g} requests of the canary, "
        f"{outcome.seconds:.1f} s from the first failing request to the slow burn's evaluation instant"
    )


def test_an_unhealthy_gpu_raises_its_alarm_and_reaches_the_responder(system: LocalSystem, nvml_state: Path) -> None:
    outcome = gpu_unhealthy(system, nvml_state, PRIMARY)

    assert outcome.healthy_before > 0, "the gateway never emitted GpuHealthy 1 (is the NVML stand-in read?)"
    # SageMaker's health check now fails, so it would replace the instance.
    assert outcome.ping_status == 503
    # The alarm breached on the 0 the gateway emitted; the responder notified (playbook gpu-unhealthy: notify).
    reason = json.loads(outcome.handled.event["detail"]["state"]["reasonData"])
    assert reason["statistic"] == "Minimum" and reason["recentDatapoints"] == [0.0], reason
    assert outcome.handled.result["outcomes"] == [], outcome.handled.result  # nothing to change, only to tell
    assert outcome.handled.result["notification_id"], outcome.handled.result
    # The canary's GPU (another instance) stays healthy.
    assert system.flow.alarm("gpu-unhealthy", CANARY) not in {
        t.alarm_name for t in system.flow.evaluator.transitions if t.state == "ALARM"
    }


@pytest.mark.slow(reason="kills the canary's CPU vLLM engine and waits for the rollback the OOM alarm starts")
def test_an_engine_killed_with_an_oom_trace_counts_oom_caught_and_the_oom_alarm_rolls_the_canary_back(
    system: LocalSystem, shared: dict[str, Any]
) -> None:
    if "rollout" not in shared:
        pytest.fail("needs the canary that the slow-burn test rolls out (run the module, in file order)")

    outcome = engine_oom(system, CUDA_OOM_TRACE.read_bytes(), shared["rollout"], CANARY)

    # The supervisor read the death's cause from the trace and the exit, and counted it.
    assert outcome.oom_caught >= 1
    assert [d.get("Cause") for d in outcome.death_records] == ["cuda_oom"], outcome.death_records
    # The template's oom alarm (Sum of OomCaught > 0 in 5 minutes) reached the responder, which rolled back.
    reason = json.loads(outcome.handled.event["detail"]["state"]["reasonData"])
    assert reason["statistic"] == "Sum" and reason["recentDatapoints"][-1] >= 1, reason
    actions = {o["action"]: o["outcome"] for o in outcome.handled.result["outcomes"]}
    assert "rollback" in actions, outcome.handled.result
    assert outcome.rollbacks and all(r["status"] == "SUCCEEDED" for r in outcome.rollbacks), outcome.rollbacks
    assert outcome.rollout["status"] == "ABORTED", outcome.rollout
    assert emitted(PRIMARY, MetricName.OOM_CAUGHT) == 0  # the primary's engine was not touched
