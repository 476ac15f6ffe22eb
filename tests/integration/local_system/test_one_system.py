"""One system: the real workflows, handlers, templates' alarms and container, end to end on the emulator.

Nothing here writes a CloudWatch datapoint or an alarm event: metrics are the EMF lines the real gateways
printed, shipped to the emulated CloudWatch Logs; the alarms are the templates'; their state changes reach
the real responder through the template's EventBridge rule. Emulated by this project (devtools/): SageMaker
hosting that runs the container per variant, UpdateEndpoint, EMF extraction, alarm evaluation (time runs
``TIME_SCALE`` times faster), EventBridge -> Lambda, Lambda's runtime. No GPU: a CUDA OOM cannot happen here;
the broken canary is a real one (its engine core dies on real prompts). A deployment takes a minute (the
primary's CPU engine starts): the queue build-up gets a fresh one with one sequence at a time; the healthy
rollout, the broken canary and the contract break share one, in that order, as the story of ``make demo`` runs:
v2 promoted, then v3 broken and rolled back to v2, then a v3 that cannot start, rolled back to v2 again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from devtools import rollout_workflow as wf
from devtools.emulator import MotoServer
from devtools.endpoint_sampler import canary_when_users_moved
from devtools.local_system import CANARY, ENDPOINT, PRIMARY, LocalSystem, emitted, local_system, wait_for
from devtools.restored_config import serves, serving_config, serving_restored
from devtools.scenarios import broken_canary, healthy_rollout, queue_build_up
from devtools.tiny_model import TinyModel
from fleetops.metrics import MetricName

pytestmark = [pytest.mark.container, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def shared_system(
    emulator: MotoServer, tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalSystem]:
    """One deployment for three scenarios in turn: the healthy rollout (it sizes from v1's fresh primary), the
    broken canary (it reads every rollback execution of the stack, so it must see only its own), then the contract
    break. Each starts from what the one before left: an endpoint in service, no execution running. Their tests run
    after this file's fresh deployment (tests/integration/local_system/conftest.py orders them), so no other
    deployment of the same endpoint starts while this one lives."""
    emulator.reset()
    with local_system(tmp_path_factory.mktemp("system"), tiny_model) as deployed:
        yield deployed


@pytest.fixture
def small_system(emulator: MotoServer, tiny_model: TinyModel, tmp_path: Path) -> Iterator[LocalSystem]:
    """The stack deployed with MaxNumSeqs 1: a primary that one long answer keeps busy."""
    emulator.reset()
    with local_system(tmp_path / "system", tiny_model, max_num_seqs=1) as deployed:
        yield deployed


def test_a_new_version_with_a_new_adapter_rolls_out_on_real_traffic(shared_system: LocalSystem) -> None:
    system = shared_system
    outcome = healthy_rollout(system, adapter="seasonal_promo", primary_instances=4, approval_step=50)

    assert outcome.execution["status"] == "SUCCEEDED", outcome.execution
    # Sized before users moved: 25 % of the 4 serving is 1 instance; 50 % of the 5 then serving (4 + 1) is 3.
    # Users asked throughout, and the two variants together never held fewer than the 4 that served them before.
    assert canary_when_users_moved(outcome.samples) == [(25.0, 1), (50.0, 3)], canary_when_users_moved(outcome.samples)
    assert min(s.total() for s in outcome.samples) >= outcome.primary_before
    # Until the person approved the 50 % step, users stayed at 25 %: asked before traffic, not after.
    assert outcome.at_approval and max(s.canary_share() for s in outcome.at_approval) == 25.0
    assert max(s.canary_share() for s in outcome.samples) == 50.0  # the promotion moved users, not a 100 % step
    # Promoted on the primary's instances grown back to what served users at the last step (4 + 3).
    [promoted] = boto3.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)["ProductionVariants"]
    assert (promoted["VariantName"], promoted["CurrentInstanceCount"]) == (PRIMARY, 7), promoted
    # During the canary: answers routed to it name v2 and can use the adapter only it serves.
    assert {a.version for a in outcome.on_canary} == {"v2"}, outcome.on_canary
    assert outcome.on_canary[-1].body["backend"]["adapter"] == "seasonal_promo"
    assert outcome.on_primary_with_new_adapter is not None and outcome.on_primary_with_new_adapter.status == 400
    assert {a.version for a in outcome.during_canary if a.variant == CANARY} == {"v2"}
    assert {a.version for a in outcome.during_canary if a.variant == PRIMARY} <= {"v1", "v2"}
    # The analysis passed on what the canary's gateway emitted.
    assert emitted(CANARY, MetricName.REQUESTS) >= 5
    # After promotion every answer names v2, served by the primary variant, whose container reports as primary.
    assert {(a.variant, a.version) for a in outcome.after} == {(PRIMARY, "v2")}, outcome.after
    container = system.host.serving(ENDPOINT, PRIMARY)  # v1's container may still be draining
    assert container.environment["VARIANT_NAME"] == PRIMARY and container.environment["MODEL_VERSION"] == "v2"
    before = emitted(PRIMARY, MetricName.REQUESTS)
    for _ in range(3):
        system.invoke("Where is my order?")
    wait_for("the promoted container's metrics", lambda: emitted(PRIMARY, MetricName.REQUESTS) >= before + 3, 60)


def test_a_broken_canary_is_rolled_back_by_its_alarm_while_the_rollout_holds_the_lease(
    shared_system: LocalSystem,
) -> None:
    before = serving_config(ENDPOINT)  # v2's after the healthy rollout (v1's when run alone)
    outcome = broken_canary(shared_system, rollout_id="v3-broken")

    assert outcome.lease_holder_before == "canary_rollout/v3-broken"
    # Users got a normal answer or the documented fallback throughout.
    assert all(a.controlled for a in outcome.answers), [a for a in outcome.answers if not a.controlled][:3]
    assert any(a.fallback for a in outcome.answers if a.variant == CANARY)
    # The canary's own metrics breached its alarm; the responder's rollback took the lease and aborted the rollout.
    assert emitted(CANARY, MetricName.BREAKER_TRIPS) > 0
    assert outcome.rollout["status"] == "ABORTED", outcome.rollout
    # One rollback did the work; the other alarms' rollbacks joined it (one page for the on-call, not several).
    assert all(r["status"] == "SUCCEEDED" for r in outcome.rollbacks), [
        {k: r.get(k) for k in ("name", "error", "cause", "states")} for r in outcome.rollbacks
    ]
    [rollback] = [r for r in outcome.rollbacks if "AlreadyRollingBack" not in r["states"]]
    assert "StopRollout" in rollback["states"] and "alarm_responder" in rollback["input"]
    assert outcome.weights_after.get(CANARY, 0.0) == 0.0
    # Back on the config before the rollout, as the rollback's copy of it (the instances serving at the rollback).
    wait_for(f"the endpoint back on {before}", lambda: serves(ENDPOINT, before), 300)
    serving_restored(ENDPOINT, before)
    assert outcome.detect_to_weight0_s is not None


def test_queue_build_up_from_real_load_raises_capacity_through_the_responder(small_system: LocalSystem) -> None:
    outcome = queue_build_up(small_system)

    assert outcome.min_capacity_after > outcome.min_capacity_before
    assert outcome.instances_after == outcome.min_capacity_after  # the endpoint scaled out to it
    # The queue-depth alarm itself, from the template, went to ALARM on a breaching datapoint (the average the
    # gateway emitted over one period, above the template's 50), and the responder scaled out on it.
    reason = json.loads(outcome.handled.event["detail"]["state"]["reasonData"])
    assert reason["statistic"] == "Average" and reason["threshold"] == 50, reason
    assert reason["recentDatapoints"] and reason["recentDatapoints"][-1] > 50, reason
    scale_out = [o for o in outcome.handled.result["outcomes"] if o["action"] == "scale_out"]
    assert scale_out and scale_out[0]["outcome"] == "applied", outcome.handled.result
    # Users got an answer, the documented fallback, or (held in the queue too long) the documented 504.
    assert all(a.controlled or a.deadline_exceeded for a in outcome.answers), [
        a for a in outcome.answers if not (a.controlled or a.deadline_exceeded)
    ][:3]
    # How many of the burst finish inside the deadline depends on this machine's speed and load (one sequence
    # at a time on a shared CPU), so the test asks only that the engine kept answering through the burst.
    assert any(a.controlled and "fallback_reason" not in a.body.get("backend", {}) for a in outcome.answers)


def test_a_model_whose_environment_breaks_the_contract_is_rolled_back_before_any_user_sees_it(
    shared_system: LocalSystem,
) -> None:
    system = shared_system
    before = serving_config(ENDPOINT)
    served = {a.version for a in (system.invoke("Where is my order?") for _ in range(3))}
    url = system.artifacts["v1"]
    request = system.rollout_request("v3-ghost", "v3", url)
    # Not in the artifact: the container exits 1 (the artifact gate, off in this stack, would have refused it).
    request["model"]["adapters"] = {"ghost": {"version": "v1", "path": "adapters/ghost", "sha256": "0" * 64}}

    result = wf.wait(wf.start(system.workflow.rollout_arn, request, name="v3-ghost"), timeout_s=600)

    assert result["status"] == "FAILED" and result["error"] == "RolledBack", result
    assert "EndpointUpdateFailed" in result["cause"] and "ghost" in result["cause"], result["cause"]
    serving_restored(ENDPOINT, before)  # or the rollback's copy of it
    after = {a.version for a in (system.invoke("Where is my order?") for _ in range(3))}
    assert after == served and "v3" not in after, (served, after)  # v2 after the tests before; v1 run alone
