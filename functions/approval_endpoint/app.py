"""Approval endpoint behind an IAM-authorised Lambda function URL (``AuthType: AWS_IAM``).

GET shows a confirmation page and changes nothing (mail scanners prefetch links); its form POSTs the
decision. POST decides the single-use approval, as the caller's IAM identity from the request context Lambda's
URL integration fills in (never from the payload; a direct invoke is refused, 403), and never as the person who
requested the rollout nor as another session of a role they share: claimed, answered to the waiting rollout
through Step Functions, audited, then marked used. ``fleetctl rollout approve|reject`` POSTs JSON instead
(``{"rollout_id", "decision", "note"}``, the step the rollout waits at) and gets JSON back. This URL is
the only way to decide: no person holds write access to the approval table, and the rollout's VerifyApproval
step promotes only what this function recorded (a SendTaskSuccess by anyone else fails the rollout).
Neither the approval id nor the task token is logged; the event is not logged.
"""

from __future__ import annotations

import html
import json
from functools import cache, partial
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qs

from aws_lambda_powertools import Logger, Tracer

from fleetops.aws.audit_table import AuditTable
from fleetops.rollout.approval import ApprovalRefusedError
from fleetops.rollout.approval_gate import (
    DecideDeps,
    DecisionResult,
    TaskGoneError,
    submit_decision,
    submit_for_rollout,
)
from fleetops.rollout.approval_table import ApprovalTable
from fleetops.rollout.function_url import Answer, UrlRequest, answer, route
from fleetops.rollout.task_callback import TaskCallback
from fleetops.rollout.url_caller import ForgedCallerError, signed_caller
from fleetops.settings import CommonSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
tracer = Tracer()


class Settings(CommonSettings):
    approval_table: str


# A wrong environment fails the cold start with a clear message, before any request.
settings = Settings.from_env()


@cache
def dependencies() -> DecideDeps:
    """AWS adapters, built once per execution environment on its first decision (the page itself needs none)."""
    return TaskCallback().decide_deps(ApprovalTable(settings.approval_table), AuditTable(settings.audit_table).write)


def _page(status: int, title: str, body: str) -> Answer:
    document = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<meta name='referrer' content='no-referrer'></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    headers = {"Cache-Control": "no-store", "Content-Security-Policy": "default-src 'none'; form-action 'self'"}
    return answer(status, document, "text/html; charset=utf-8", headers)


def _decision(value: str | None) -> Literal["approve", "reject"] | None:
    return value if value in ("approve", "reject") else None  # type: ignore[return-value]


def confirm(request: UrlRequest) -> Answer:
    params = request.query
    decision = _decision(params.get("decision"))
    approval_id = params.get("id", "")
    if decision is None or not approval_id:
        return _page(400, "Not a valid approval link", "<p>The link needs an id and a decision.</p>")
    form = (
        f"<p>You are about to <strong>{decision}</strong> this rollout step.</p>"
        "<form method='post'>"
        f"<input type='hidden' name='id' value='{html.escape(approval_id, quote=True)}'>"
        f"<input type='hidden' name='decision' value='{decision}'>"
        f"<button type='submit'>Confirm: {decision}</button></form>"
    )
    return _page(200, f"Confirm: {decision} rollout step", form)


#: Longest reason a rejection may carry (it travels in SendTaskFailure's cause, at most 32768 characters).
_NOTE_MAX = 2000


def _json(status: int, body: dict[str, Any]) -> Answer:
    return answer(status, json.dumps(body), "application/json", {"Cache-Control": "no-store"})


def _decide_json(request: UrlRequest, caller: str) -> Answer:
    """The CLI's POST: ``{"rollout_id", "decision", "note"?}`` in, the decision or the refusal as JSON out."""
    try:
        body = json.loads(request.body or "")
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("rollout_id"), str):
        return _json(400, {"error": "malformed", "message": "the body is a JSON object with rollout_id and decision"})
    decision = _decision(body.get("decision"))
    if decision is None:
        return _json(400, {"error": "malformed", "message": "decision must be approve or reject"})
    note = body.get("note") or ""
    if not isinstance(note, str) or len(note) > _NOTE_MAX:
        return _json(400, {"error": "malformed", "message": f"note must be text of at most {_NOTE_MAX} characters"})
    try:
        result = submit_for_rollout(body["rollout_id"], decision, caller, request.received, dependencies(), note=note)
    except ApprovalRefusedError as exc:
        logger.warning("approval refused", extra={"reason": exc.reason, "caller": caller})
        return _json(exc.http_status, {"error": exc.reason, "message": str(exc)})
    except TaskGoneError as exc:
        return _json(410, {"error": "gone", "message": str(exc)})
    _log_decided(result)
    return _json(200, result.model_dump(mode="json"))


def _log_decided(result: DecisionResult) -> None:
    logger.info("approval decided", extra=result.model_dump())


def decide(request: UrlRequest, caller: str) -> Answer:
    if (request.headers.get("content-type") or "").startswith("application/json"):
        return _decide_json(request, caller)
    form = parse_qs(request.body or "")
    decision = _decision((form.get("decision") or [""])[0])
    if decision is None:
        return _page(400, "Unknown decision", "<p>Decision must be approve or reject.</p>")
    try:
        result = submit_decision((form.get("id") or [""])[0], decision, caller, request.received, dependencies())
    except ApprovalRefusedError as exc:
        logger.warning("approval refused", extra={"reason": exc.reason, "caller": caller})
        return _page(exc.http_status, "Approval refused", f"<p>{html.escape(str(exc))}</p>")
    except TaskGoneError as exc:
        return _page(410, "Too late", f"<p>{html.escape(str(exc))}</p>")
    _log_decided(result)
    done = {"approve": "approved", "reject": "rejected"}[decision]
    return _page(
        200,
        done.capitalize(),
        f"<p>Rollout {html.escape(result.rollout_id)} on {html.escape(result.endpoint_name)} at "
        f"{result.step_weight}%: {done} by {html.escape(caller)}.</p>",
    )


@logger.inject_lambda_context(clear_state=True, log_event=False)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        caller = signed_caller(event, context.invoked_function_arn)
    except ForgedCallerError as exc:
        logger.warning("not a signed function URL request", extra={"why": str(exc)})
        body = json.dumps({"error": "forbidden", "message": str(exc)})
        return {"statusCode": 403, "headers": {"Content-Type": "application/json"}, "body": body}
    # "now" is when Lambda received the request (request.received), taken from the event.
    return route(UrlRequest.from_event(event), {"GET": confirm, "POST": partial(decide, caller=caller)})
