"""Pydantic models of the Bedrock import workflow: the request, the validated plan, smoke-test results."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fleetops.validation import StrictModel, problems

#: A few prompts a manga-store assistant must answer; the smoke test only checks that answers come back.
DEFAULT_SMOKE_PROMPTS = (
    "Recommend one manga for a reader who loved Frieren, in one sentence.",
    "Is volume 12 of One Piece in stock? Answer as the store assistant would.",
    "Say hello to a customer in Japanese and English.",
)

_S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<prefix>.*)$")


class ImportRequest(StrictModel):
    """The state machine's input: which artifacts become which registry version.

    ``import_id`` makes the run idempotent: it names the execution and the import job, and with the
    rest of the request it fixes the client token, so a repeated run never starts a second job.
    """

    import_id: str = Field(pattern=r"^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,38}[a-zA-Z0-9])?$")
    model_name: str = Field(pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_-]{0,39}$")
    version: str = Field(pattern=r"^[a-zA-Z0-9][a-zA-Z0-9._-]{0,19}$")
    artifacts_s3_uri: str
    prompts: tuple[str, ...] = Field(default=DEFAULT_SMOKE_PROMPTS, min_length=1, max_length=5)
    max_tokens: int = Field(default=64, ge=1, le=1024)
    # Polling: wait initial, doubling, capped; at most max_polls GetModelImportJob calls.
    poll_initial_seconds: int = Field(default=60, ge=0, le=3600)
    poll_max_seconds: int = Field(default=300, ge=0, le=3600)
    max_polls: int = Field(default=60, ge=1, le=200)

    @field_validator("artifacts_s3_uri")
    @classmethod
    def _s3_folder(cls, value: str) -> str:
        match = _S3_URI.match(value)
        if match is None:
            raise ValueError(f"must look like s3://bucket/prefix/, got {value!r}")
        prefix = match["prefix"]
        return f"s3://{match['bucket']}/{prefix.rstrip('/') + '/' if prefix else ''}"

    @field_validator("prompts")
    @classmethod
    def _non_blank(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not p.strip() for p in value):
            raise ValueError("prompts must not be blank")
        return value

    @property
    def bucket(self) -> str:
        match = _S3_URI.match(self.artifacts_s3_uri)
        assert match is not None  # guaranteed by the validator
        return match["bucket"]

    @property
    def prefix(self) -> str:
        return self.artifacts_s3_uri.removeprefix(f"s3://{self.bucket}/")


class ArtifactObject(BaseModel):
    """One S3 object under the artifact prefix (key relative to the prefix)."""

    model_config = ConfigDict(frozen=True)

    name: str
    size: int = Field(ge=0)


class ImportPlan(BaseModel):
    """What the validator hands to the rest of the workflow (all names deterministic)."""

    model_config = ConfigDict(frozen=True)

    import_id: str
    model_name: str
    version: str
    artifacts_s3_uri: str
    job_name: str
    imported_model_name: str
    client_request_token: str
    architecture: str
    family: str
    converse_supported: bool
    total_bytes: int
    weight_files: int
    prompts: tuple[str, ...]
    max_tokens: int
    poll_waits: tuple[int, ...]
    warnings: tuple[str, ...] = ()


class SmokeTestRequest(BaseModel):
    """Input of the smoke-test Lambda (built by the state machine from the plan and the finished job)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    imported_model_arn: str = Field(pattern=r"^arn:aws[a-z-]*:bedrock:[a-z0-9-]+:\d{12}:imported-model/.+$")
    prompts: tuple[str, ...] = Field(min_length=1, max_length=5)
    max_tokens: int = Field(default=64, ge=1, le=1024)
    converse_supported: bool = True


class Reply(BaseModel):
    """One Converse answer, reduced to what the verdict needs."""

    model_config = ConfigDict(frozen=True)

    text: str
    stop_reason: str
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: int = 0


class PromptResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    prompt: str
    ok: bool
    detail: str
    reply: Reply | None = None


class SmokeTestReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    imported_model_arn: str
    verdict: str  # "passed" | "skipped"
    results: tuple[PromptResult, ...] = ()
    reason: str = ""


class ImportRequestError(ValueError):
    """The workflow's input is wrong; the message lists every bad field. Nothing was touched."""


def parse_request(event: dict[str, object]) -> ImportRequest:
    """Parse the state machine input, turning pydantic's errors into one readable message.

    Examples
    --------
    >>> try:
    ...     parse_request({"import_id": "x", "version": "1"})
    ... except ImportRequestError as exc:
    ...     print(exc)
    bad import request: model_name: Field required; artifacts_s3_uri: Field required
    """
    try:
        return ImportRequest.model_validate(event)
    except ValidationError as exc:
        listed = "; ".join(problems(exc))
        raise ImportRequestError(f"bad import request: {listed}") from exc
