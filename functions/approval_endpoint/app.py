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
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qs

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.event_handler import LambdaFunctionUrlResolver, Response

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
from fleetops.rollout.task_callback import TaskCallback
from fleetops.rollout.url_caller import ForgedCallerError, signed_caller
from fleetops.settings import CommonSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
tracer = Tracer()
app = LambdaFunctionUrlResolver()


class Settings(CommonSettings):
    approval_table: str


# A wrong environment fails the cold start with a clear message, before any request.
settings = Settings.from_env()


@cache
def dependencies() -> DecideDeps:
    """AWS adapters, built once per execution environment on its first decision (the page itself needs none)."""
    return TaskCallback().decide_deps(ApprovalTable(settings.approval_table), AuditTable(settings.audit_table).write)


def _page(status: int, title: str, body: str) -> Response[str]:
    document = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<meta name='referrer' content='no-referrer'></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    headers = {"Cache-Control": "no-store", "Content-Security-Policy": "default-src 'none'; form-action 'self'"}
    return Response(status_code=status, content_type="text/html; charset=utf-8", body=document, headers=headers)


def _decision(value: str | None) -> Literal["approve", "reject"] | None:
    return value if value in ("approve", "reject") else None  # type: ignore[return-value]


def _request_time() -> datetime:
    # "now" is when Lambda received the request, taken from the event.
    return datetime.fromtimestamp(app.current_event.request_context.time_epoch / 1000, UTC)


@app.get("/")
def confirm() -> Response[str]:
    params = app.current_event.query_string_parameters or {}
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


def _caller() -> str:
    caller: str = app.context["caller"]  # verified in lambda_handler, before routing
    return caller


#: Longest reason a rejection may carry (it travels in SendTaskFailure's cause, at most 32768 characters).
_NOTE_MAX = 2000


def _json(status: int, body: dict[str, Any]) -> Response[str]:
    return Response(
        status_code=status,
        content_type="application/json",
        body=json.dumps(body),
        headers={"Cache-Control": "no-store"},
    )


def _decide_json(caller: str) -> Response[str]:
    """The CLI's POST: ``{"rollout_id", "decision", "note"?}`` in, the decision or the refusal as JSON out."""
    try:
        body = json.loads(app.current_event.decoded_body or "")
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
        result = submit_for_rollout(body["rollout_id"], decision, caller, _request_time(), dependencies(), note=note)
    except ApprovalRefusedError as exc:
        logger.warning("approval refused", extra={"reason": exc.reason, "caller": caller})
        return _json(exc.http_status, {"error": exc.reason, "message": str(exc)})
    except TaskGoneError as exc:
        return _json(410, {"error": "gone", "message": str(exc)})
    _log_decided(result)
    return _json(200, result.model_dump(mode="json"))


def _log_decided(result: DecisionResult) -> None:
    logger.info("approval decided", extra=result.model_dump())


@app.post("/")
def decide() -> Response[str]:
    caller = _caller()
    if (app.current_event.headers.get("content-type") or "").startswith("application/json"):
        return _decide_json(caller)
    form = parse_qs(app.current_event.decoded_body or "")
    decision = _decision((form.get("decision") or [""])[0])
    if decision is None:
        return _page(400, "Unknown decision", "<p>Decision must be approve or reject.</p>")
    try:
        result = submit_decision((form.get("id") or [""])[0], decision, caller, _request_time(), dependencies())
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
    app.context["caller"] = caller  # cleared by resolve() after the request
    return app.resolve(event, context)
