"""EventBridge rules with Lambda targets, added to moto 5.2.5 by this project.

moto delivers matched events to SQS, CloudWatch Logs, archives and other buses, and fails ``PutEvents``
with ``NotImplementedError`` for a Lambda target. Here a Lambda target of an ``ENABLED`` rule whose pattern
matches is invoked asynchronously, as EventBridge does: ``PutEvents`` returns at once and a worker thread
per function (one execution environment, so invocations of one function run one at a time, in order)
invokes it through moto's Lambda backend. Under :func:`devtools.lambda_dispatch.dispatch_lambdas` that runs
the project's real handler.

The function gets the event as AWS sends it (``time`` as ``2026-11-21T19:02:00Z``, no moto-internal field),
or the target's ``Input`` / ``InputTransformer`` result. Every delivery is recorded in :data:`deliveries`
with the handler's result or error, so a test can wait for "the responder handled the event for alarm X";
a handler error is logged at ERROR. Not emulated: Lambda's asynchronous retries (``MaximumRetryAttempts``),
the rule's ``RetryPolicy`` and dead-letter queues, ``InputPath``. Tests that rely on it say so.
"""

from __future__ import annotations

import copy
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, cast

from moto.awslambda.utils import get_backend
from moto.events.models import Rule
from moto.events.utils import EventMessageType, EventTemplateParser

logger = logging.getLogger(__name__)

Status = Literal["pending", "succeeded", "failed"]


@dataclass
class Delivery:
    """One event handed to one Lambda target, and what came of it."""

    rule: str
    target_id: str
    function_name: str
    event: Any  # what the function received: the event, or the target's Input / InputTransformer output
    status: Status = "pending"
    result: Any = None
    error: str | None = None
    queued_at: float = field(default_factory=time.monotonic)

    @property
    def alarm_name(self) -> str | None:
        """``detail.alarmName`` of a CloudWatch alarm state change (None for other events)."""
        detail = self.event.get("detail") if isinstance(self.event, dict) else None
        return detail.get("alarmName") if isinstance(detail, dict) else None

    @property
    def alarm_state(self) -> str | None:
        """``detail.state.value`` of a CloudWatch alarm state change (None for other events)."""
        detail = self.event.get("detail") if isinstance(self.event, dict) else None
        state = detail.get("state") if isinstance(detail, dict) else None
        return state.get("value") if isinstance(state, dict) else None


class Deliveries:
    """Every Lambda delivery made in this process, in order, with a bounded wait for one to finish."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._items: list[Delivery] = []

    def _add(self, delivery: Delivery) -> None:
        with self._changed:
            self._items.append(delivery)
            self._changed.notify_all()

    def _finish(self, delivery: Delivery, status: Status, result: Any = None, error: str | None = None) -> None:
        with self._changed:
            delivery.status, delivery.result, delivery.error = status, result, error
            self._changed.notify_all()

    def all(self) -> list[Delivery]:
        """A snapshot of every delivery so far."""
        with self._changed:
            return list(self._items)

    def clear(self) -> None:
        """Forget the deliveries made so far (a new test, a new deployment)."""
        with self._changed:
            self._items.clear()

    def wait(self, match: Callable[[Delivery], bool], timeout_s: float = 30.0) -> Delivery:
        """The first delivery that ``match`` accepts once its handler has finished (succeeded or failed).

        Raises
        ------
        TimeoutError
            After ``timeout_s``, listing the deliveries seen.
        """
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for delivery in self._items:
                    if delivery.status != "pending" and match(delivery):
                        return delivery
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [(d.function_name, d.alarm_name, d.alarm_state, d.status, d.error) for d in self._items]
                    raise TimeoutError(f"no matching Lambda delivery finished within {timeout_s} s; seen: {seen}")
                self._changed.wait(left)

    def idle(self, timeout_s: float = 30.0) -> None:
        """Wait until no delivery is pending (bounded); raises ``TimeoutError`` naming the ones still running."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while pending := [d for d in self._items if d.status == "pending"]:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(pending)} Lambda deliveries still pending: {pending}")
                self._changed.wait(left)


#: The process-wide record (moto's server, and so every rule, lives in this process).
deliveries = Deliveries()

_workers: dict[str, queue.Queue[Delivery]] = {}
_workers_lock = threading.Lock()


def _aws_time(value: Any) -> str:
    """EventBridge's ``time`` as AWS writes it (moto keeps what PutEvents sent: epoch seconds, or nothing)."""
    if isinstance(value, int | float):
        moment = datetime.fromtimestamp(value, UTC)
    elif isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
    else:
        return str(value) if value else datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _payload(target: dict[str, Any], event: EventMessageType) -> Any:
    """What the target receives: the event, or the target's ``Input`` / ``InputTransformer`` output."""
    if "InputPath" in target:
        raise NotImplementedError("InputPath on a Lambda target is not emulated (use Input or InputTransformer)")
    if "Input" in target:
        return json.loads(target["Input"])
    aws_event = {k: v for k, v in event.items() if k != "ingestion-time"}
    aws_event["time"] = _aws_time(event.get("time"))
    transformer = target.get("InputTransformer")
    if transformer:
        return EventTemplateParser.parse(
            input_template=transformer.get("InputTemplate"),
            input_paths_map=transformer.get("InputPathsMap", {}),
            event=cast(EventMessageType, {**aws_event, "ingestion-time": event.get("ingestion-time")}),
        )
    return aws_event


def _invoke(delivery: Delivery, account_id: str, region: str) -> None:
    name, _, qualifier = delivery.function_name.partition(":")
    try:
        backend = get_backend(account_id, region)
        backend.get_function(name, qualifier or None)  # EventBridge cannot deliver to a missing function
        response_headers: dict[str, str] = {}
        raw = backend.invoke(
            name, qualifier or None, json.dumps(delivery.event), {"x-amz-invocation-type": "Event"}, response_headers
        )
    except Exception as exc:
        logger.exception("EventBridge rule %s could not invoke Lambda %s", delivery.rule, delivery.function_name)
        deliveries._finish(delivery, "failed", error=f"{type(exc).__name__}: {exc}")
        return
    text = raw.decode() if isinstance(raw, bytes) else (raw or "")
    try:
        result: Any = json.loads(text) if text else None
    except ValueError:
        result = text
    if response_headers.get("x-amz-function-error"):
        logger.error(
            "Lambda %s failed on the event of rule %s (alarm %s): %s",
            delivery.function_name,
            delivery.rule,
            delivery.alarm_name,
            text,
        )
        deliveries._finish(delivery, "failed", result=result, error=text)
    else:
        deliveries._finish(delivery, "succeeded", result=result)


def _worker(work: queue.Queue[Delivery], account_id: str, region: str) -> None:
    while True:
        _invoke(work.get(), account_id, region)


def _enqueue(delivery: Delivery, account_id: str, region: str) -> None:
    key = f"{account_id}/{region}/{delivery.function_name}"
    with _workers_lock:
        work = _workers.get(key)
        if work is None:
            work = _workers[key] = queue.Queue()
            # Daemon: an idle worker never keeps the interpreter alive; one per function, like one environment.
            threading.Thread(
                target=_worker, args=(work, account_id, region), name=f"lambda-{delivery.function_name}", daemon=True
            ).start()
    work.put(delivery)


def drop_pending(timeout_s: float = 60.0) -> list[Delivery]:
    """Drop every queued delivery, wait for the ones being handled, forget them all; returns the dropped ones.

    For a reset: a responder invocation queued by one test or demo part must not act on the next one's account
    (it would find that part's alarms, endpoint and lease under the same names). Raises ``TimeoutError`` when a
    handler is still running after ``timeout_s``.
    """
    dropped: list[Delivery] = []
    with _workers_lock:
        for work in _workers.values():
            while True:
                try:
                    delivery = work.get_nowait()
                except queue.Empty:
                    break
                deliveries._finish(delivery, "failed", error="dropped: the emulator was reset before it ran")
                dropped.append(delivery)
    deliveries.idle(timeout_s)
    deliveries.clear()
    return dropped


def _lambda_function(arn: str) -> str | None:
    """``name`` or ``name:qualifier`` of a Lambda ARN, None for any other service."""
    parts = arn.split(":")
    if len(parts) >= 7 and parts[2] == "lambda" and parts[5] == "function":
        return ":".join(parts[6:])
    return None


def install() -> None:
    """Patch moto's EventBridge rules in this process (idempotent)."""
    if getattr(Rule, "_fleet_patched", False):
        return
    original = Rule.send_to_targets

    def send_to_targets(self: Rule, original_event: EventMessageType, transform_input: bool = True) -> None:
        lambdas = [t for t in self.targets if _lambda_function(t["Arn"])]
        others = [t for t in self.targets if not _lambda_function(t["Arn"])]
        if others:
            rest = copy.copy(self)  # moto's own delivery for the other targets, without mutating the shared rule
            rest.targets = others
            original(rest, original_event, transform_input)
        if not lambdas or self.state != "ENABLED" or not self.event_pattern.matches_event(original_event):
            return
        for target in lambdas:
            function_name = _lambda_function(target["Arn"]) or ""
            try:
                payload = _payload(target, original_event)
            except Exception as exc:
                logger.exception("rule %s: cannot build the input of target %s", self.name, target["Id"])
                failed = Delivery(self.name, target["Id"], function_name, original_event, "failed", error=str(exc))
                deliveries._add(failed)
                continue
            delivery = Delivery(self.name, target["Id"], function_name, payload)
            deliveries._add(delivery)
            _enqueue(delivery, self.account_id, self.region_name)

    Rule.send_to_targets = send_to_targets  # type: ignore[method-assign]
    Rule._fleet_patched = True  # type: ignore[attr-defined]
