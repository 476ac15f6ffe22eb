"""The caller-side Bedrock fallback: ask the chat endpoint, and Bedrock when the endpoint cannot answer.

Prod's models run network-isolated (fleet.yaml ``rollout_policy``): the container reaches no network, so the
gateway cannot ask Bedrock and answers a failed engine with its configured fallback message. The caller can.
:class:`FallbackChat` sends the invocation to the endpoint (``InvokeEndpoint``) and asks the fallback model
(Bedrock ``Converse``) when

- the gateway answered with its documented fallback marker: HTTP 200, ``choices[0].finish_reason`` is
  ``"fallback"`` (the engine failed) and ``backend.version`` is not ``"bedrock"`` (a container with network
  already asked Bedrock: not asked twice);
- SageMaker answered ``ModelError`` with a 5xx from the container (draining, deadline), or the endpoint stayed
  unavailable (throttled, ``ServiceUnavailable``, ``InternalFailure``, no connection) after the retries: the
  failures no container-side fallback can answer.

A 4xx from the gateway (a malformed or oversized request) and SageMaker's ``ValidationError`` (an unknown endpoint,
a bad parameter) are the caller's to fix: :class:`EndpointRequestError`, never a Bedrock answer that would hide
them. When Bedrock fails too, the gateway's fallback message answers if there was one, else
:class:`FallbackFailedError`.

Retries (tenacity, exponential backoff with jitter) cover only what a retry can fix; the default clients turn
botocore's own retries off so the two do not multiply. Logs carry error codes and reasons, never the prompt.

Examples
--------
The chat backend builds one per endpoint and keeps it::

    chat = FallbackChat("manga-chat-prod", "arn:aws:bedrock:us-east-1:123456789012:imported-model/abc",
                        system_prompt="You are the manga store's assistant.")
    answer = chat.ask({"messages": [{"role": "user", "content": "Something like Frieren?"}]})
    answer.text, answer.source  # ("...", "endpoint") or ("...", "bedrock")
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectionError
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential, wait_random

from clients.converse_request import ChatBodyError, converse_request

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient
    from mypy_boto3_sagemaker_runtime import SageMakerRuntimeClient

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The gateway's documented fallback marker (README, GPU data plane container): ``choices[0].finish_reason``.
FALLBACK_FINISH_REASON = "fallback"
#: ``backend.version`` of a fallback the gateway already answered from Bedrock (a container with network).
GATEWAY_BEDROCK_VERSION = "bedrock"
#: ``ChatAnswer.fallback_reason`` when the endpoint gave no answer at all (no gateway reason to relay).
ENDPOINT_FAILED = "endpoint_failed"

#: Errors a retry can fix: the service was busy or briefly unavailable.
_TRANSIENT_ENDPOINT = frozenset(
    {"ThrottlingException", "ServiceUnavailable", "InternalFailure", "InternalDependencyException"}
)
_TRANSIENT_BEDROCK = frozenset(
    {"ThrottlingException", "ServiceUnavailableException", "InternalServerException", "ModelNotReadyException"}
)
#: SageMaker's endpoint-name pattern (CreateEndpoint).
_ENDPOINT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
#: No botocore retries under tenacity's; SageMaker cuts an invocation at 60 s.
_SDK_CONFIG = Config(retries={"mode": "standard", "max_attempts": 1}, connect_timeout=5, read_timeout=70)

Source = Literal["endpoint", "bedrock", "gateway"]


class EndpointRequestError(Exception):
    """The endpoint refused the request itself (a 4xx, an unknown endpoint): fix the request, no fallback.

    ``status`` is the gateway's HTTP status (``None`` for SageMaker's own refusal), ``code`` the error code.
    """

    def __init__(self, status: int | None, code: str, message: str) -> None:
        self.status, self.code = status, code
        where = f" ({status})" if status else ""
        super().__init__(f"the endpoint refused the request: {code}{where}: {message}")


class FallbackFailedError(Exception):
    """The endpoint could not answer and neither could the fallback model; the message names both errors."""


@dataclass(frozen=True)
class ChatAnswer:
    """What the user is answered, and where it came from.

    ``source``: ``endpoint`` (the fleet's model), ``bedrock`` (the fallback model) or ``gateway`` (the gateway's
    fallback message: Bedrock failed too). ``fallback_reason``: the gateway's (``engine_unavailable``,
    ``engine_error``, ``engine_oom``) or ``endpoint_failed``; ``None`` for the model's own answer.
    ``endpoint_error``/``bedrock_error``: the error code that made each side fail, if one did.
    """

    text: str
    source: Source
    fallback_reason: str | None = None
    endpoint_error: str | None = None
    bedrock_error: str | None = None
    endpoint_attempts: int = 0
    bedrock_attempts: int = 0


class _CallFailed(Exception):
    def __init__(self, cause: BaseException, attempts: int) -> None:
        super().__init__(repr(cause))
        self.cause, self.attempts = cause, attempts


class FallbackChat:
    """One chat endpoint with its Bedrock fallback.

    Parameters
    ----------
    endpoint_name
        The SageMaker endpoint (fleet.yaml ``endpoints[].name``).
    fallback_model_id
        The Bedrock model, inference profile or imported model (ID or ARN) asked when the endpoint cannot answer.
    sagemaker_runtime, bedrock_runtime
        boto3 clients; ``None`` builds them with botocore's retries off (tenacity retries here).
    system_prompt
        Bedrock's system prompt (the gateway's stays in the image).
    endpoint_attempts, bedrock_attempts
        Tries of each call on a transient error (throttling, unavailable, no connection), the first included.
    backoff_s, max_backoff_s
        The first wait between tries, doubled each time (with jitter) up to the maximum.
    """

    def __init__(
        self,
        endpoint_name: str,
        fallback_model_id: str,
        *,
        sagemaker_runtime: SageMakerRuntimeClient | None = None,
        bedrock_runtime: BedrockRuntimeClient | None = None,
        system_prompt: str | None = None,
        endpoint_attempts: int = 2,
        bedrock_attempts: int = 3,
        backoff_s: float = 0.2,
        max_backoff_s: float = 2.0,
    ) -> None:
        problems = []
        if not _ENDPOINT_NAME.match(endpoint_name):
            problems.append(f"endpoint_name {endpoint_name!r} is not a SageMaker endpoint name")
        if not fallback_model_id or fallback_model_id != fallback_model_id.strip():
            problems.append(f"fallback_model_id {fallback_model_id!r}: a Bedrock model ID or ARN is required")
        if endpoint_attempts < 1 or bedrock_attempts < 1:
            problems.append("endpoint_attempts and bedrock_attempts count the first try: at least 1")
        if backoff_s < 0 or max_backoff_s < backoff_s:
            problems.append("backoff_s must be 0 or more and at most max_backoff_s")
        if problems:
            raise ValueError("; ".join(problems))
        self.endpoint_name = endpoint_name
        self.fallback_model_id = fallback_model_id
        self.sagemaker_runtime = sagemaker_runtime or boto3.client("sagemaker-runtime", config=_SDK_CONFIG)
        self.bedrock_runtime = bedrock_runtime or boto3.client("bedrock-runtime", config=_SDK_CONFIG)
        self.system_prompt = system_prompt
        self._attempts = {"endpoint": endpoint_attempts, "bedrock": bedrock_attempts}
        self._wait = wait_exponential(multiplier=backoff_s, max=max_backoff_s) + wait_random(0, backoff_s)

    def ask(self, body: Mapping[str, Any]) -> ChatAnswer:
        """Answer one ``/invocations`` body (a JSON answer; ``stream`` is refused): the endpoint's, else Bedrock's.

        Raises
        ------
        ChatBodyError
            The body is not a JSON object with a question, or asks for a stream.
        EndpointRequestError
            The endpoint refused the request (4xx, unknown endpoint): no fallback.
        FallbackFailedError
            The endpoint gave no answer and Bedrock failed too.
        """
        if not isinstance(body, Mapping):
            raise ChatBodyError(f"body: a JSON object is expected, got {type(body).__name__}")
        if body.get("stream"):
            raise ChatBodyError("stream: ask() answers JSON; a stream that fails mid-way cannot be answered again")
        try:
            answer, attempts = self._retrying("endpoint", _TRANSIENT_ENDPOINT, lambda: self._invoke(body))
        except _CallFailed as failed:
            if isinstance(failed.cause, ClientError) and not _endpoint_failed(failed.cause):
                raise _refusal(failed.cause) from failed.cause
            error = _endpoint_error(failed.cause)
            return self._from_bedrock(body, ENDPOINT_FAILED, error, None, failed.attempts)
        choice = (answer.get("choices") or [{}])[0]
        text = str((choice.get("message") or {}).get("content") or "")
        backend = answer.get("backend") or {}
        if choice.get("finish_reason") != FALLBACK_FINISH_REASON or backend.get("version") == GATEWAY_BEDROCK_VERSION:
            return ChatAnswer(text, "endpoint", endpoint_attempts=attempts)
        reason = str(backend.get("fallback_reason") or ENDPOINT_FAILED)
        return self._from_bedrock(body, reason, None, text, attempts)

    def _invoke(self, body: Mapping[str, Any]) -> dict[str, Any]:
        response = self.sagemaker_runtime.invoke_endpoint(
            EndpointName=self.endpoint_name,
            ContentType="application/json",
            Accept="application/json",
            Body=json.dumps(body).encode(),
        )
        answer = json.loads(response["Body"].read())
        return answer if isinstance(answer, dict) else {}

    def _from_bedrock(
        self, body: Mapping[str, Any], reason: str, endpoint_error: str | None, gateway_text: str | None, tried: int
    ) -> ChatAnswer:
        request = converse_request(self.fallback_model_id, body, system_prompt=self.system_prompt)
        logger.warning(
            "endpoint could not answer (reason=%s, error=%s): asking the fallback model",
            reason,
            endpoint_error,
            extra={"event": "caller_fallback", "endpoint": self.endpoint_name, "reason": reason},
        )
        try:
            text, attempts = self._retrying("bedrock", _TRANSIENT_BEDROCK, lambda: self._converse(request))
        except _CallFailed as failed:
            code = _code(failed.cause)
            logger.warning("fallback model failed: error=%s", code, extra={"event": "caller_fallback_failed"})
            if gateway_text is None:
                raise FallbackFailedError(
                    f"endpoint {self.endpoint_name} could not answer ({endpoint_error}, {_tries(tried)}) and "
                    f"neither could the fallback model ({code}, {_tries(failed.attempts)})"
                ) from failed.cause
            return ChatAnswer(gateway_text, "gateway", reason, endpoint_error, code, tried, failed.attempts)
        return ChatAnswer(text, "bedrock", reason, endpoint_error, None, tried, attempts)

    def _converse(self, request: dict[str, Any]) -> str:
        response = self.bedrock_runtime.converse(**request)
        blocks = response["output"].get("message", {}).get("content", [])
        return "".join(block.get("text", "") for block in blocks)

    def _retrying(self, side: str, transient: frozenset[str], call: Callable[[], T]) -> tuple[T, int]:
        """``call()`` and the tries it took; an AWS failure (the last try's, or one no retry fixes) as _CallFailed.

        Retried: the error codes in ``transient`` and a connection that could not be made. Not retried: a read
        that timed out (the endpoint took its 60 s already), any other code.
        """
        retrying = Retrying(
            stop=stop_after_attempt(self._attempts[side]),
            wait=self._wait,
            retry=retry_if_exception(lambda exc: isinstance(exc, ConnectionError) or _code(exc) in transient),
            reraise=True,
        )
        tries = 0
        try:
            for attempt in retrying:
                with attempt:
                    tries = attempt.retry_state.attempt_number
                    result = call()
        except (ClientError, BotoCoreError) as exc:
            raise _CallFailed(exc, tries) from exc
        return result, tries


def _tries(count: int) -> str:
    return f"{count} try" if count == 1 else f"{count} tries"


def _code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "ClientError"))
    return type(exc).__name__


def _original_status(exc: ClientError) -> int | None:
    status = _modeled(exc).get("OriginalStatusCode")  # ModelError's own field, beside Error
    return int(status) if status is not None else None


def _modeled(exc: ClientError) -> dict[str, Any]:
    """The error's response with its modeled fields (botocore puts them beside ``Error``)."""
    return dict(exc.response)


def _endpoint_failed(exc: ClientError) -> bool:
    """Whether a SageMaker error means the endpoint failed (Bedrock answers) rather than refused the request."""
    code = _code(exc)
    if code == "ModelError":
        status = _original_status(exc)
        return status is None or status >= 500
    return code != "ValidationError"


def _endpoint_error(exc: BaseException) -> str:
    if isinstance(exc, ClientError) and _code(exc) == "ModelError":
        return f"ModelError {_original_status(exc)}"
    return _code(exc)


def _refusal(exc: ClientError) -> EndpointRequestError:
    """The gateway's error body (``{"error": {"code", "message"}}``) or SageMaker's own, as the caller's to fix."""
    message = str(exc.response.get("Error", {}).get("Message", ""))
    original = _modeled(exc).get("OriginalMessage")
    if original is not None:
        try:
            error = json.loads(original)["error"]
            return EndpointRequestError(_original_status(exc), str(error["code"]), str(error["message"]))
        except (ValueError, KeyError, TypeError):
            message = str(original)
    return EndpointRequestError(_original_status(exc), _code(exc), message)
