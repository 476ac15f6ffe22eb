"""Demo part: canary rollouts from ``statemachines/canary_rollout.asl.json`` on the emulator.

1. v7 ramps 5 -> 25 -> 50 -> 100 %, each step baked and analysed from CloudWatch; at 50 % a person
   approves through the approval endpoint; at 100 % it is promoted and the pointer updated.
2. v8 ramps too, but the approver rejects it at 25 %: the rollback state machine puts v7 back.

Bake, polling and approval times are seconds here (minutes to hours in production).
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

import boto3

from devtools import rollout_workflow as wf
from devtools.emulator import MotoServer
from devtools.emulator_extensions import sagemaker as emulated_sagemaker

HEALTHY = {"requests": 40, "errors": 0, "latency_ms": 900, "ttft_ms": 280}
APPROVER = "arn:aws:iam::123456789012:user/ayumi"


def request(rollout_id: str, version: str, approval_steps: list[int], steps: list[int]) -> dict[str, Any]:
    base: dict[str, Any] = json.loads((wf.REPO / "events" / "rollout_validate.json").read_text())["request"]
    base["model"] |= {"version": version, "image_uri": base["model"]["image_uri"].replace("v7", version)}
    return base | {
        "rollout_id": rollout_id,
        "steps": steps,
        "bake_seconds": 1,
        "approval_steps": approval_steps,
        "approval": {"timeout_seconds": 60, "heartbeat_seconds": 60},
        "thresholds": {"min_requests": 20},
        "in_service": {"first_wait_seconds": 1, "max_wait_seconds": 1, "timeout_seconds": 20},
    }


def _describe(name: str, output: dict[str, Any]) -> str:
    if name == "Validate":
        plan = output["plan"]
        steps = [s["weight"] for s in plan["steps"]]
        return f"plan: steps {steps}, previous config {plan['previous_endpoint_config_name']}"
    if name == "SetWeights":
        return f"canary weight -> {output['cursor']['step']['weight']} %"
    if name == "Analyse":
        return str(output["analysis"]["summary"])
    if name == "Rollback":
        return f"rollback execution {output.get('rollback', {}).get('status')}"
    return ""


# Plumbing states (polling, choices, cursors) are left out of the story.
_QUIET = {"PollAfterDeploy", "PollAfterWeights", "PollAfterPromote", "DescribeEndpoint", "InService?", "NextPoll",
          "PollWait", "Continue", "FirstStep", "LoadStep", "MarkBakeStart", "Verdict", "NeedsApproval?", "Advance",
          "MoreSteps?", "CanExtend?", "DryRun?"}  # fmt: skip


class Follower:
    """Print each state of an execution once, as it finishes."""

    def __init__(self, execution_arn: str) -> None:
        self.execution_arn = execution_arn
        self.seen = 0
        self.started = time.monotonic()

    def poll(self) -> None:
        sfn = boto3.client("stepfunctions")
        events = sfn.get_execution_history(executionArn=self.execution_arn, maxResults=1000)["events"]
        for event in events[self.seen :]:
            details = event.get("stateExitedEventDetails")
            if details and details["name"] not in _QUIET:
                name = details["name"]
                note = _describe(name, json.loads(details.get("output") or "{}"))
                print(f"  {time.monotonic() - self.started:5.1f}s  {name:<20} {note}", flush=True)
        self.seen = len(events)

    def until_done(self, timeout_s: float = 90) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.poll()
            described = boto3.client("stepfunctions").describe_execution(executionArn=self.execution_arn)
            if described["status"] != "RUNNING":
                self.poll()
                return dict(described)
            time.sleep(1.0)
        raise TimeoutError("the demo rollout did not finish in time")


def _decide(workflow: wf.RolloutWorkflow, follower: Follower, decision: str) -> None:
    deadline = time.monotonic() + 60
    link = ""
    while not link and time.monotonic() < deadline:
        follower.poll()
        try:
            link = wf.approval_link(workflow, decision, follower.execution_arn, timeout_s=0.5)
        except TimeoutError:
            continue
    follower.poll()
    print(f"  mail to the team: {decision} link {link.split('?')[0]}?id=<opaque single-use id>&decision={decision}")
    page = wf.open_link(link, APPROVER)
    print(f"  GET  (mail scanner or approver) -> {page['statusCode']}: confirmation page, nothing decided yet")
    page = wf.submit(link, APPROVER)
    done = {"approve": "approved", "reject": "rejected"}[decision]
    print(f"  POST (approver confirms)        -> {page['statusCode']}: {done} by {APPROVER}")
    again = wf.submit(link, APPROVER)
    print(f"  POST again (link reused)        -> {again['statusCode']}: refused, the id was single-use")


def _state() -> str:
    described = boto3.client("sagemaker").describe_endpoint(EndpointName=wf.ENDPOINT)
    weights = {v["VariantName"]: v["CurrentWeight"] for v in described["ProductionVariants"]}
    value = boto3.client("ssm").get_parameter(Name=f"{wf.POINTER_PREFIX}/{wf.ENDPOINT}")["Parameter"]["Value"]
    version = json.loads(value)["version"]
    return f"endpoint config {described['EndpointConfigName']}, variants {weights}, pointer version {version}"


def run(emulator: MotoServer) -> None:
    logging.getLogger("moto").setLevel(logging.CRITICAL)  # the interpreter logs every Fail state as an error
    workflow = wf.deploy()
    saved = emulated_sagemaker.behaviour.update_seconds
    emulated_sagemaker.behaviour.update_seconds = 0.5  # SageMaker takes minutes; the demo, half a second
    try:
        os.environ.update(workflow.environment)
        wf.create_endpoint()
        print("An endpoint 'manga-chat' serves model v6 on one 'primary' variant.")
        with wf.handlers(), wf.traffic(canary=HEALTHY, primary=HEALTHY):
            print("\n1) Rollout v7: 5 -> 25 -> 50 -> 100 %, human approval at 50 %")
            execution = wf.start(workflow.rollout_arn, request("v7", "v7", [50], [5, 25, 50, 100]), name="v7")
            follower = Follower(execution)
            _decide(workflow, follower, "approve")
            result = follower.until_done()
            print(f"  => {result['status']}: {_state()}")

            print("\n2) Rollout v8: rejected by the approver at 25 % -> automatic rollback")
            execution = wf.start(workflow.rollout_arn, request("v8", "v8", [25], [5, 25, 100]), name="v8")
            follower = Follower(execution)
            _decide(workflow, follower, "reject")
            result = follower.until_done()
            print(f"  => {result['status']} ({result.get('error')}): {_state()}")
    finally:
        emulated_sagemaker.behaviour.update_seconds = saved
