"""SageMaker Runtime invocations that reach real containers, added to moto 5.2.5 by this project.

moto's ``InvokeEndpoint`` answers canned data and it has no ``InvokeEndpointWithResponseStream`` at
all (its path, ``/endpoints/<name>/invocations-response-stream``, is even routed to the SageMaker
control-plane app). While a :class:`~devtools.emulator_extensions.sagemaker.Hosting` is registered,
this module answers both operations for the endpoints it hosts, in front of moto's own dispatch
(the moto server is a WSGI app in this process), and everything else goes on to moto untouched:

- the variant is drawn at random in proportion to the variants' current weights (weight 0 gets
  nothing), or is the one ``TargetVariant`` names (an unknown name: ``ValidationError``); an endpoint
  that is not ``InService``/``Updating`` or does not exist: ``ValidationError``;
- the body, ``ContentType``, ``Accept`` and ``CustomAttributes`` go to the container's
  ``POST /invocations``; its body, content type and custom attributes come back with
  ``InvokedProductionVariant``. A non-2xx answer is SageMaker's ``ModelError`` (HTTP 424 with
  ``OriginalStatusCode``, ``OriginalMessage``, ``LogStreamArn``), as botocore's model defines it; no
  answer within :attr:`Behaviour.invocation_timeout_s` (SageMaker: 60 s) is a ``ModelError`` too;
- the streaming variant forwards the same way and relays the container's body as it arrives, one
  AWS event-stream ``PayloadPart`` event per chunk read (werkzeug writes each one at once, chunked),
  so botocore's own parser yields ``{"PayloadPart": {"Bytes": ...}}``; a failure mid-stream ends the
  stream with a ``ModelStreamError`` exception event.

- no container hosted: an endpoint no hosting runs (or any endpoint, with none registered) is answered by a stand-in
  for the project's container, which can say only what the model's environment tells it: the gateway's chat
  completion shape with ``backend.version`` (and the ``backend_version=`` custom attribute) naming the
  ``MODEL_VERSION`` of the model the chosen variant runs in the config serving now, and a content that says no model
  ran. A model without ``MODEL_VERSION`` (one the real container would refuse to start) gets moto's canned answer,
  as before; streaming still needs a hosting.

- metrics: every request sent to a variant (a container's or the stand-in's) adds SageMaker's per-variant
  ``AWS/SageMaker`` datapoints (:mod:`~devtools.emulator_extensions.sagemaker_metrics`); the stand-in, where no
  model ran, publishes no ``ModelLatency``.

- data capture: where the endpoint's config has a ``DataCaptureConfig`` with ``EnableCapture``, a sampled
  share (``InitialSamplingPercentage``) of answered ``InvokeEndpoint`` calls is written after the answer, in
  the background, as SageMaker's JSON lines record (``captureData.endpointInput``/``endpointOutput``,
  ``eventMetadata.eventId``/``inferenceTime``, and ``inferenceId`` where the call gave an ``InferenceId``) under
  ``<DestinationS3Uri>/<endpoint>/<variant>/yyyy/mm/dd/hh/``, SSE-KMS with the config's ``KmsKeyId`` if it has one.

Approximated: the wording of the ``ValidationError`` messages other than "Endpoint ... not found"; an
unreachable container answers ``ServiceUnavailable``; data capture writes one file per record (SageMaker
batches records into files). Not emulated: the 6 MB payload limit,
``SessionId``/``TargetModel``/``InferenceComponentName`` headers, async inference.
"""

from __future__ import annotations

import json
import random
import re
import struct
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from moto.iam.models import get_account_id_from
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.s3.models import s3_backends
from moto.sagemaker.models import FakeEndpoint, sagemaker_backends
from werkzeug.wrappers import Request, Response

from devtools.emulator_extensions import application_autoscaling, sagemaker, sagemaker_metrics
from fleetops.model_contract import MODEL_VERSION

_PATH = re.compile(r"^/endpoints/(?P<name>[^/]+)/(?P<op>invocations|invocations-response-stream)$")
_SCOPE = re.compile(r"Credential=(?P<key>[^/,\s]+)/\d{8}/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request")


@dataclass
class Behaviour:
    """Knobs tests turn (the server runs in the test process)."""

    #: SageMaker cuts an invocation whose container has not answered (or sent the next chunk) in 60 s.
    invocation_timeout_s: float = 60.0


behaviour = Behaviour()
#: One pooled client for every invocation: a client per call builds an SSL context each time, which under load
#: made this emulator, not the containers, the bottleneck. Thread-safe; the timeout is set per request.
_containers = httpx.Client(limits=httpx.Limits(max_connections=512, max_keepalive_connections=64))


# ---------------------------------------------------------------- AWS event-stream framing
def _string_header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return bytes([len(raw_name)]) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value  # 7: string


def encode_event(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One ``application/vnd.amazon.eventstream`` message: prelude, prelude CRC, headers, payload, message CRC.

    Examples
    --------
    >>> from botocore.eventstream import EventStreamBuffer
    >>> buffer = EventStreamBuffer()
    >>> buffer.add_data(encode_event({":message-type": "event"}, b"hi"))
    >>> [(m.headers, m.payload) for m in buffer]
    [({':message-type': 'event'}, b'hi')]
    """
    raw_headers = b"".join(_string_header(name, value) for name, value in headers.items())
    prelude = struct.pack(">II", 12 + len(raw_headers) + len(payload) + 4, len(raw_headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + raw_headers + payload
    return message + struct.pack(">I", zlib.crc32(message))


def payload_part(data: bytes) -> bytes:
    """A ``PayloadPart`` event carrying ``data``."""
    headers = {":event-type": "PayloadPart", ":content-type": "application/octet-stream", ":message-type": "event"}
    return encode_event(headers, data)


def stream_error(message: str, error_code: str = "ModelStreamError") -> bytes:
    """A ``ModelStreamError`` exception event (botocore raises it as ``EventStreamError`` while iterating)."""
    headers = {":exception-type": "ModelStreamError", ":content-type": "application/json", ":message-type": "exception"}
    return encode_event(headers, json.dumps({"Message": message, "ErrorCode": error_code}).encode())


# ---------------------------------------------------------------- errors, as botocore's rest-json parser reads them
def _error(code: str, status: int, message: str, **fields: Any) -> Response:
    body = json.dumps({"Message": message, **fields})
    return Response(body, status, {"x-amzn-ErrorType": code, "Content-Type": "application/x-amz-json-1.1"})


def _validation(message: str) -> Response:
    return _error("ValidationError", 400, message)


def _log_group_url(region: str, account: str, endpoint_name: str) -> tuple[str, str]:
    group = f"/aws/sagemaker/Endpoints/{endpoint_name}"
    url = (
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#logEventViewer:group={group}"
        f" in account {account}"
    )
    return f"arn:aws:logs:{region}:{account}:log-group:{group}", url


def _model_error(target: _Target, status: int, content: bytes) -> Response:
    original = content.decode("utf-8", "replace")
    kind = "client" if status < 500 else "server"
    log_arn, url = _log_group_url(target.region, target.account, target.endpoint.endpoint_name)
    message = (
        f'Received {kind} error ({status}) from {target.variant} with message "{original}". '
        f"See {url} for more information."
    )
    code = "CLIENT_ERROR_FROM_MODEL" if status < 500 else "SERVER_ERROR_FROM_MODEL"
    return _error(
        "ModelError",
        424,
        message,
        OriginalStatusCode=status,
        OriginalMessage=original,
        LogStreamArn=log_arn,
        ErrorCode=code,
    )


def _timeout_error(target: _Target) -> Response:
    log_arn, _ = _log_group_url(target.region, target.account, target.endpoint.endpoint_name)
    message = (
        f"Your invocation timed out while waiting for a response from container {target.variant}. Review the "
        "latency metrics for each container in Amazon CloudWatch, resolve the issue, and try again."
    )
    return _error("ModelError", 424, message, LogStreamArn=log_arn, ErrorCode="INVOCATION_TIMEOUT")


# ---------------------------------------------------------------- routing
@dataclass(frozen=True)
class _Target:
    endpoint: FakeEndpoint
    variant: str
    url: str
    region: str
    account: str


def _choose_variant(endpoint: FakeEndpoint, target_variant: str | None) -> str | Response:
    variants = {str(v["VariantName"]): float(v.get("CurrentWeight", 1.0)) for v in endpoint.production_variants}
    if target_variant is not None:
        if target_variant not in variants:
            return _validation(
                f"The variant name '{target_variant}' in the TargetVariant header is not present within endpoint "
                f"'{endpoint.endpoint_name}' (variants: {', '.join(sorted(variants))})."
            )
        return target_variant
    weighted = {name: weight for name, weight in variants.items() if weight > 0}
    if not weighted:
        return _validation(f"Endpoint {endpoint.endpoint_name} has no production variant with a weight above 0.")
    return random.choices(list(weighted), weights=list(weighted.values()))[0]


def _locate(environ: Mapping[str, Any]) -> tuple[str, str, str, str] | None:
    """``(operation, endpoint name, region, account)`` of a runtime invocation, or ``None`` for anything else."""
    path = _PATH.match(str(environ.get("PATH_INFO", "")))
    scope = _SCOPE.search(str(environ.get("HTTP_AUTHORIZATION", "")))
    # sagemaker-runtime signs as "sagemaker"; moto itself tells it from the control plane by the path.
    if path is None or scope is None or scope["service"] != "sagemaker" or environ.get("REQUEST_METHOD") != "POST":
        return None
    return path["op"], path["name"], scope["region"], get_account_id_from(scope["key"])


def _resolve(environ: Mapping[str, Any]) -> tuple[str, _Target | Response] | None:
    """The operation and where it goes, or an error answer; ``None`` for moto to handle."""
    host = sagemaker.hosting
    located = _locate(environ)
    if located is None:
        return None
    operation, name, region, account = located
    endpoint = sagemaker_backends[account][region].endpoints.get(name)
    if endpoint is not None:
        application_autoscaling.scale(account, region, name)  # a scheduled action due now counts this request
    if host is None or endpoint is None or not host.hosts(str(endpoint.arn)):
        if endpoint is not None and operation == "invocations":
            return _standin(endpoint, environ.get("HTTP_X_AMZN_SAGEMAKER_TARGET_VARIANT"), region, account)
        if host is None:
            return None
    if endpoint is None:
        return operation, _validation(f"Endpoint {name} of account {account} not found.")
    if not host.hosts(str(endpoint.arn)):
        return operation, _validation(f"Endpoint {name} runs no container of the local hosting: cannot stream.")
    sagemaker.settle(endpoint)
    return operation, _route(host, endpoint, environ.get("HTTP_X_AMZN_SAGEMAKER_TARGET_VARIANT"), region, account)


#: What the stand-in answers instead of a model's words.
STANDIN_TEXT = "[emulated endpoint: no container runs here; this answer only names the model's MODEL_VERSION]"


def _standin(
    endpoint: FakeEndpoint, target_variant: str | None, region: str, account: str
) -> tuple[str, Response] | None:
    """``InvokeEndpoint`` of an endpoint no container serves (see the module docstring); ``None``: moto's answer."""
    sagemaker.settle(endpoint)
    name = endpoint.endpoint_name
    if endpoint.endpoint_status not in ("InService", "Updating"):
        return "invocations", _validation(f"Endpoint {name} of account {account} is {endpoint.endpoint_status}.")
    variant = _choose_variant(endpoint, target_variant)
    if isinstance(variant, Response):
        return "invocations", variant
    backend = sagemaker_backends[account][region]
    config = backend.endpoint_configs.get(endpoint.endpoint_config_name)  # while Updating, the old config serves
    spec = next((v for v in (config.production_variants if config else []) if v["VariantName"] == variant), None)
    model = backend._models.get(str(spec["ModelName"])) if spec else None
    environment = ((model.primary_container if model else None) or {}).get("Environment") or {}
    version = environment.get(MODEL_VERSION)
    if not version:
        return None
    answer = {
        "object": "chat.completion",
        "model": str(spec["ModelName"]) if spec else name,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": STANDIN_TEXT}, "finish_reason": "stop"}],
        "backend": {"version": version, "adapter": None},
    }
    headers = {
        "x-Amzn-Invoked-Production-Variant": variant,
        "Content-Type": "application/json",
        "X-Amzn-SageMaker-Custom-Attributes": f"backend_version={version}",
    }
    sagemaker_metrics.record(endpoint, variant, account, region, status=200, model_latency_s=None)  # no model ran
    return "invocations", Response(json.dumps(answer), 200, headers)


def _route(
    host: sagemaker.Hosting, endpoint: FakeEndpoint, target_variant: str | None, region: str, account: str
) -> _Target | Response:
    name = endpoint.endpoint_name
    if endpoint.endpoint_status not in ("InService", "Updating"):  # while updating, the old config serves
        return _validation(f"Endpoint {name} of account {account} is {endpoint.endpoint_status}.")
    variant = _choose_variant(endpoint, target_variant)
    if isinstance(variant, Response):
        return variant
    url = host.serving_url(str(endpoint.arn), variant)
    if url is None:
        message = f"Variant {variant} of endpoint {name} has no running container (its image is not hosted locally)."
        return _error("ServiceUnavailable", 503, message)
    return _Target(endpoint, variant, url, region, account)


def _container_headers(request: Request, accept_header: str) -> dict[str, str]:
    headers = {
        "Content-Type": request.headers.get("Content-Type"),
        "Accept": request.headers.get(accept_header),
        "X-Amzn-SageMaker-Custom-Attributes": request.headers.get("X-Amzn-SageMaker-Custom-Attributes"),
    }
    return {k: v for k, v in headers.items() if v is not None}


def _answer_headers(target: _Target, response: httpx.Response, content_type_header: str) -> dict[str, str]:
    headers = {"x-Amzn-Invoked-Production-Variant": target.variant}
    if "content-type" in response.headers:
        headers[content_type_header] = response.headers["content-type"]
    if "x-amzn-sagemaker-custom-attributes" in response.headers:
        headers["X-Amzn-SageMaker-Custom-Attributes"] = response.headers["x-amzn-sagemaker-custom-attributes"]
    return headers


def _unreachable(target: _Target, exc: Exception) -> Response:
    return _error("ServiceUnavailable", 503, f"The container of variant {target.variant} is unreachable: {exc!r}")


def _record(target: _Target, status: int | None, seconds: float | None) -> None:
    sagemaker_metrics.record(
        target.endpoint, target.variant, target.account, target.region, status=status, model_latency_s=seconds
    )


def invoke(target: _Target, request: Request) -> Response:
    """``InvokeEndpoint`` against the variant's container."""
    sent = time.perf_counter()
    try:
        answer = _containers.post(
            f"{target.url}/invocations",
            content=request.get_data(),
            headers=_container_headers(request, "Accept"),
            timeout=behaviour.invocation_timeout_s,
        )
    except httpx.TimeoutException:
        _record(target, None, None)
        return _timeout_error(target)
    except httpx.HTTPError as exc:
        return _unreachable(target, exc)
    _record(target, answer.status_code, time.perf_counter() - sent)
    if not answer.is_success:
        return _model_error(target, answer.status_code, answer.content)
    _capture(target, request, answer.content)
    return Response(answer.content, 200, _answer_headers(target, answer, "Content-Type"))


def _capture(target: _Target, request: Request, answer_body: bytes) -> None:
    """Data capture of one answered invocation, off the caller's path (see the module docstring)."""
    backend = sagemaker_backends[target.account][target.region]
    config = backend.endpoint_configs.get(target.endpoint.endpoint_config_name)
    capture = (config.data_capture_config if config else None) or {}
    if not capture.get("EnableCapture") or random.uniform(0, 100) >= float(capture["InitialSamplingPercentage"]):
        return
    now = datetime.now(UTC)
    event_id = str(uuid.uuid4())

    def side(data: bytes, mode: str) -> dict[str, str]:
        return {"observedContentType": "application/json", "mode": mode, "data": data.decode(), "encoding": "JSON"}

    metadata = {"eventId": event_id, "inferenceTime": now.strftime("%Y-%m-%dT%H:%M:%SZ")}
    inference_id = request.headers.get("X-Amzn-SageMaker-Inference-Id")
    if inference_id:
        metadata["inferenceId"] = inference_id
    record = {
        "captureData": {
            "endpointInput": side(request.get_data(), "INPUT"),
            "endpointOutput": side(answer_body, "OUTPUT"),
        },
        "eventMetadata": metadata,
        "eventVersion": "0",
    }
    bucket, _, prefix = str(capture["DestinationS3Uri"]).removeprefix("s3://").partition("/")
    key = (
        f"{prefix.rstrip('/')}/{target.endpoint.endpoint_name}/{target.variant}/{now:%Y/%m/%d/%H}/"
        f"{now:%M-%S-%f}-{event_id}.jsonl"
    )
    line = (json.dumps(record) + "\n").encode()
    key_id = capture.get("KmsKeyId")
    encryption = {"encryption": "aws:kms", "kms_key_id": key_id} if key_id else {}
    threading.Thread(
        target=s3_backends[target.account]["global"].put_object,
        args=(bucket, key, line),
        kwargs=encryption,
        daemon=True,
    ).start()


def invoke_with_response_stream(target: _Target, request: Request) -> Response:
    """``InvokeEndpointWithResponseStream``: the container's body relayed as ``PayloadPart`` events."""
    sent = time.perf_counter()
    try:
        upstream = _containers.send(
            _containers.build_request(
                "POST",
                f"{target.url}/invocations",
                content=request.get_data(),
                headers=_container_headers(request, "X-Amzn-SageMaker-Accept"),
                timeout=httpx.Timeout(behaviour.invocation_timeout_s, connect=5.0),
            ),
            stream=True,
        )
    except httpx.TimeoutException:
        _record(target, None, None)
        return _timeout_error(target)
    except httpx.HTTPError as exc:
        return _unreachable(target, exc)
    if not upstream.is_success:
        content = upstream.read()
        upstream.close()
        _record(target, upstream.status_code, time.perf_counter() - sent)
        return _model_error(target, upstream.status_code, content)

    def events() -> Iterator[bytes]:
        status: int | None = upstream.status_code
        try:
            for chunk in upstream.iter_raw():
                if chunk:
                    yield payload_part(chunk)
        except httpx.HTTPError as exc:
            status = None  # the caller got a ModelStreamError: counted as a 5xx
            yield stream_error(f"The container of variant {target.variant} broke the stream: {exc!r}")
        finally:
            upstream.close()
            _record(target, status, None if status is None else time.perf_counter() - sent)

    headers = _answer_headers(target, upstream, "X-Amzn-SageMaker-Content-Type")
    return Response(events(), 200, headers, content_type="application/vnd.amazon.eventstream")


def _dispatch(original: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    def __call__(
        self: DomainDispatcherApplication, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        resolved = _resolve(environ)
        if resolved is None:
            return original(self, environ, start_response)
        operation, target = resolved
        if isinstance(target, Response):
            return target(environ, start_response)
        request = Request(environ)
        answer = invoke(target, request) if operation == "invocations" else invoke_with_response_stream(target, request)
        return answer(environ, start_response)

    return __call__


def install() -> None:
    """Put the runtime in front of moto's dispatcher in this process (idempotent; inert without a hosting)."""
    if getattr(DomainDispatcherApplication, "_fleet_runtime_patched", False):
        return
    DomainDispatcherApplication.__call__ = _dispatch(DomainDispatcherApplication.__call__)  # type: ignore[method-assign]
    DomainDispatcherApplication._fleet_runtime_patched = True  # type: ignore[attr-defined]
