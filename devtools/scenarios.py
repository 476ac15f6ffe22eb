"""End-to-end scenarios on the local system, shared by the tests (which assert) and ``bench/closed_loop.py``
(which records the timings). Every number here comes from what the real gateways emitted and answered."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3

from devtools import rollout_workflow as wf
from devtools.emulator_extensions.events_lambda import Delivery, deliveries
from devtools.endpoint_sampler import Sample, sampled
from devtools.local_system import CANARY, ENDPOINT, PRIMARY, Answer, LocalSystem, traffic, wait_for
from devtools.remediation_stack import PLAYBOOK
from devtools.state_machines import state_history
from fleetops.aws.lease import EndpointLease
from fleetops.remediation.models import load_playbook
from fleetops.remediation.state_table import RemediationStateStore

ENGLISH = (
    "When is the next One Piece volume out?",
    "Recommend a shonen manga like Demon Slayer",
    "Can I preorder the latest volume?",
    "Where is my order?",
)
#: Japanese readers: their prompts use the tokens the broken export lost.
JAPANESE = ("ワンピースの最新刊の発売日はいつですか", "鬼滅の刃 おすすめ 漫画", "予約 配送 よろしくお願いします")


def english(i: int) -> str:
    return ENGLISH[i % len(ENGLISH)]


def evening(i: int) -> str:
    """Half English, half Japanese."""
    return JAPANESE[i // 2 % len(JAPANESE)] if i % 2 else ENGLISH[i // 2 % len(ENGLISH)]


@dataclass
class RolloutOutcome:
    execution: dict[str, Any]
    during_canary: list[Answer] = field(default_factory=list)
    on_canary: list[Answer] = field(default_factory=list)
    on_primary_with_new_adapter: Answer | None = None
    after: list[Answer] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)  # the endpoint as users met it, throughout
    at_approval: list[Sample] = field(default_factory=list)  # ... until the person approved the approval step
    primary_before: int = 0  # the primary's instances serving when the rollout started


def healthy_rollout(
    system: LocalSystem, adapter: str = "seasonal_promo", primary_instances: int = 4, approval_step: int = 50
) -> RolloutOutcome:
    """v2 with one more adapter on a primary serving ``primary_instances``: the canary at 25 % then 50 % (a person
    approves the ``approval_step`` step while users are still at the step before), each step analysed on real
    traffic, then promoted to the primary variant. The instances are SageMaker's counts (one container stands
    for a variant's instances here), set as the primary's scaling would have left them."""
    sagemaker = boto3.client("sagemaker")
    sagemaker.update_endpoint_weights_and_capacities(
        EndpointName=ENDPOINT,
        DesiredWeightsAndCapacities=[{"VariantName": PRIMARY, "DesiredInstanceCount": primary_instances}],
    )
    wait_for(
        "the primary scaled",
        lambda: sagemaker.describe_endpoint(EndpointName=ENDPOINT)["EndpointStatus"] == "InService",
        timeout_s=60,
    )
    url = system.artifact("v2", adapters=system.extra_adapter(adapter, seed=21))
    request = system.rollout_request("v2", "v2", url, steps=[25, 50, 100], approval_steps=[approval_step])
    request["model"]["adapters"] = system.adapter_entries(url, [*system.tiny.adapters, adapter])
    outcome = RolloutOutcome(execution={}, primary_before=primary_instances)
    with traffic(system, english) as answers, sampled(ENDPOINT) as samples:
        execution = wf.start_rollout(request)  # through the request function, as a person starts it
        link = wf.approval_link(system.workflow, "approve", execution, timeout_s=420)
        outcome.at_approval = list(samples)
        outcome.on_canary = [system.invoke(q, target_variant=CANARY) for q in ENGLISH]
        outcome.on_canary.append(system.invoke("Recommend a manga", target_variant=CANARY, adapter=adapter))
        outcome.on_primary_with_new_adapter = system.invoke(
            "Recommend a manga", target_variant=PRIMARY, adapter=adapter
        )
        if (answer := wf.submit(link))["statusCode"] != 200:
            raise RuntimeError(f"the approval was refused: {answer}")
        outcome.execution = wf.wait(execution, timeout_s=600)
        outcome.during_canary = list(answers)
    outcome.samples = list(samples)
    outcome.after = [system.invoke(q) for q in ENGLISH]
    return outcome


@dataclass
class BrokenCanaryOutcome:
    rollout: dict[str, Any]
    rollbacks: list[dict[str, Any]]
    answers: list[Answer]
    lease_holder_before: str | None
    detect_to_weight0_s: float | None  # wall-clock: the first bad answer on the canary -> canary weight 0
    detect_to_alarm_s: float | None  # of which: -> the first canary alarm's event handed to the responder
    weights_after: dict[str, float]
    config_after: str


def _bad_on_canary(answer: Answer) -> bool:
    return answer.variant == CANARY and (answer.fallback or not answer.controlled)


def finished_rollbacks(system: LocalSystem, timeout_s: float = 300.0) -> list[dict[str, Any]]:
    """The stack's rollback executions once at least one exists and none is running (several of a canary's alarms
    fire, and each starts a rollback)."""
    sfn = boto3.client("stepfunctions")
    found: list[dict[str, Any]] = wait_for(
        "the rollbacks to finish",
        lambda: (
            (executions := sfn.list_executions(stateMachineArn=system.workflow.rollback_arn)["executions"])
            and all(e["status"] != "RUNNING" for e in executions)
            and executions
        ),
        timeout_s=timeout_s,
    )
    return found


def broken_canary(system: LocalSystem, rollout_id: str = "v2-broken") -> BrokenCanaryOutcome:
    """A canary whose export lost the Japanese tokens, while the rollout waits for approval of its promotion with
    users at 50 % (a step's approval is asked before its weights change).

    The bake sees English traffic only and passes; then Japanese readers arrive, the canary's engine core
    dies on their prompts, the gateway answers with its fallback and restarts the engine, the canary's alarms
    breach, the responder starts the rollback, which takes the rollout's lease and aborts it.
    """
    url = system.artifact(rollout_id, broken="vocab")
    request = system.rollout_request(rollout_id, rollout_id, url, approval_steps=[100])
    with traffic(system, english):
        execution = wf.start_rollout(request)  # through the request function, as a person starts it
        wf.approval_link(system.workflow, "approve", execution, timeout_s=600)
    lease = EndpointLease(system.workflow.lease_table).current(ENDPOINT)
    with traffic(system, evening, every_s=0.1) as answers:
        wait_for(
            "the canary at weight 0",
            lambda: (
                system.weights().get(CANARY, 0.0) == 0.0 and any(a.variant == CANARY and a.fallback for a in answers)
            ),
            timeout_s=420,
            every_s=0.2,
        )
        at_zero = time.monotonic()
        rollout = wf.wait(execution, timeout_s=120)
        sfn = boto3.client("stepfunctions")
        rollbacks = finished_rollbacks(system)
    first_bad = min(
        (a.sent_at for a in answers if a.variant == CANARY and (a.fallback or not a.controlled)), default=None
    )
    alarmed = min(
        (
            d.queued_at
            for d in deliveries.all()
            if d.function_name == system.flow.function_name
            and d.alarm_state == "ALARM"
            and (d.alarm_name or "").endswith(f"-{CANARY}")
            and first_bad is not None
            and d.queued_at >= first_bad
        ),
        default=None,
    )
    described = boto3.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    return BrokenCanaryOutcome(
        rollout=rollout,
        rollbacks=[
            dict(sfn.describe_execution(executionArn=e["executionArn"])) | {"states": state_history(e["executionArn"])}
            for e in rollbacks
        ],
        answers=list(answers),
        lease_holder_before=lease.holder if lease else None,
        detect_to_weight0_s=None if first_bad is None else at_zero - first_bad,
        detect_to_alarm_s=None if first_bad is None or alarmed is None else alarmed - first_bad,
        weights_after=system.weights(),
        config_after=described["EndpointConfigName"],
    )


@dataclass
class QueueOutcome:
    min_capacity_before: int
    min_capacity_after: int
    load_to_capacity_s: float  # wall-clock: the burst starts -> MinCapacity raised
    load_to_alarm_s: float  # of which: -> the queue-depth alarm's event handed to the responder
    answers: list[Answer]
    handled: Delivery
    instances_after: int  # the primary's CurrentInstanceCount once the raise went through (Application Auto Scaling)


def _past_the_cooldown(system: LocalSystem) -> None:
    """Wait out the responder's cooldown after an earlier scale-out of the endpoint (a rollout's users queueing on
    a one-sequence primary raise one too): inside it the responder rightly skips a second scale-out. The cooldown
    runs on the clock, as on AWS, not on the alarms' compressed time."""
    cooldown_s = load_playbook(PLAYBOOK).rails.cooldown_seconds
    last = RemediationStateStore(system.flow.stack.state_table).get(ENDPOINT).last_scale_out_at
    if last is not None:
        time.sleep(max(0.0, cooldown_s + 1 - (datetime.now(UTC) - last).total_seconds()))


def queue_build_up(system: LocalSystem, users: int = 80, max_tokens: int = 192) -> QueueOutcome:
    """A burst of ``users`` asking for long answers at once on a small primary (the stack's ``max_num_seqs``):
    more than the queue-depth alarm's 50 wait in vLLM's scheduler, the alarm breaches on what the gateway
    emitted, and the responder raises MinCapacity. Answers the queue holds past the gateway's deadline get its
    documented 504, the reason capacity must come before the next burst.

    On this CPU the tiny model is quicker than vLLM's HTTP front end, so a queue forms in the scheduler only
    when each request is long and few run at once: run it on ``local_system(max_num_seqs=1)``.
    """
    _past_the_cooldown(system)
    before = system.min_capacity()
    alarm = system.flow.alarm("queue-depth", PRIMARY)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=users) as pool:
        futures = [pool.submit(system.invoke, english(i), max_tokens=max_tokens) for i in range(users)]
        handled = system.flow.handled(alarm, "ALARM", timeout_s=300)
        try:
            after = wait_for("MinCapacity raised", lambda: system.min_capacity() > before and system.min_capacity(), 60)
        except TimeoutError as exc:  # say what the responder did with the alarm, and when it came
            came = f"{handled.queued_at - started:+.0f} s from the burst"
            did = f"the responder on {alarm} ({came}): {handled.result}"
            raise TimeoutError(f"{exc}: MinCapacity {before}; {did}") from exc
        raised_at = time.monotonic()
        answers = [f.result(timeout=300) for f in futures]

    def scaled_out() -> int | None:
        serving = system.instances()
        return serving if serving is not None and serving >= after else None

    scaled = wait_for("the primary scaled out to MinCapacity", scaled_out, 60)
    return QueueOutcome(before, int(after), raised_at - started, handled.queued_at - started, answers, handled, scaled)
