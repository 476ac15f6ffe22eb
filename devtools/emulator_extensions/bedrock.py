"""Bedrock Custom Model Import and Converse, added to moto 5.2.5 by this project (moto has neither).

What this module adds, reached over HTTP through the moto server like any other emulated API; the
responses are serialised by moto from botocore's real service model (``ActionResult``), so shapes,
status codes and error codes are the API's own. Tests relying on it say so.

- ``CreateModelImportJob``: checks the request against the API's constraints (name patterns, role
  ARN, ``s3://`` source) with ``ValidationException``; a repeated ``clientRequestToken`` returns the
  first job's ARN without starting another (the documented idempotency); a job or imported-model
  name already used with another token is a ``ConflictException``.
- ``GetModelImportJob`` (by name or ARN): ``InProgress`` for :attr:`Behaviour.polls_in_progress`
  reads, then ``Completed`` (an imported-model record appears, with ``importedModelArn``) or ``Failed``
  with ``failureMessage``. A job fails when its S3 prefix holds no ``config.json`` (as Bedrock does
  when it cannot read the model), or when a test scripted it with :func:`script_import_failure`.
- ``ListModelImportJobs`` and ``GetImportedModel``.
- bedrock-runtime ``Converse`` for imported-model ARNs: a deterministic, clearly emulated answer
  (``[emulated Converse: <model>] ...``); :func:`script_converse_reply` makes a model answer badly.
- Step Functions ``aws-sdk:bedrock:*`` errors are named ``Bedrock.<Code>`` as on AWS (moto would say
  ``bedrock.<Code>``); the parameter casing of those tasks is fixed in ``stepfunctions``.

Transitions are evaluated lazily when a job is read (no background thread); state lives on moto's
backend objects, so ``/moto-api/reset`` clears it.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from moto.bedrock.models import BedrockBackend, bedrock_backends
from moto.bedrock.responses import BedrockResponse
from moto.bedrockruntime.models import BedrockRuntimeBackend
from moto.bedrockruntime.responses import BedrockRuntimeResponse
from moto.core.exceptions import ServiceException
from moto.core.responses import ActionResult
from moto.s3.models import s3_backends
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_aws_sdk

from devtools.emulated_account import ACCOUNT_ID, REGION


@dataclass
class Behaviour:
    """Knobs tests turn (the server runs in the test process, so a module attribute reaches it)."""

    #: How many GetModelImportJob reads see ``InProgress`` before the job finishes (real jobs: minutes).
    polls_in_progress: int = 2


behaviour = Behaviour()


class _ValidationException(ServiceException):
    code = "ValidationException"


class _ConflictException(ServiceException):
    code = "ConflictException"


class _ResourceNotFoundException(ServiceException):
    code = "ResourceNotFoundException"


_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9\+\-\.])*$")
_MODEL_NAME = re.compile(r"^([0-9a-zA-Z][_-]?)+$")
_ROLE_ARN = re.compile(r"^arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+$")


@dataclass
class ImportJob:
    arn: str
    name: str
    imported_model_name: str
    role_arn: str
    s3_uri: str
    token: str | None
    created: datetime
    reads: int = 0
    status: str = "InProgress"
    failure_message: str | None = None
    imported_model_arn: str | None = None
    ended: datetime | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "jobArn": self.arn,
            "jobName": self.name,
            "importedModelName": self.imported_model_name,
            "roleArn": self.role_arn,
            "modelDataSource": {"s3DataSource": {"s3Uri": self.s3_uri}},
            "status": self.status,
            "creationTime": self.created,
            "lastModifiedTime": self.ended or self.created,
        }
        optional = {
            "importedModelArn": self.imported_model_arn,
            "failureMessage": self.failure_message,
            "endTime": self.ended,
        }
        return out | {k: v for k, v in optional.items() if v is not None}


@dataclass
class ImportedModel:
    arn: str
    name: str
    job: ImportJob
    architecture: str
    created: datetime


@dataclass
class _State:
    """Per-account, per-region state, kept on moto's BedrockBackend (so a reset clears it)."""

    jobs: dict[str, ImportJob] = field(default_factory=dict)  # by name
    models: dict[str, ImportedModel] = field(default_factory=dict)  # by ARN
    scripted_failures: dict[str, str] = field(default_factory=dict)  # job name -> failureMessage
    scripted_replies: dict[str, dict[str, Any]] = field(default_factory=dict)  # model name -> reply fields


def _state(backend: BedrockBackend) -> _State:
    state = backend.__dict__.get("_fleetops_import_state")
    if state is None:
        state = backend.__dict__["_fleetops_import_state"] = _State()
    assert isinstance(state, _State)
    return state


def script_import_failure(
    job_name: str, failure_message: str, *, account_id: str = ACCOUNT_ID, region: str = REGION
) -> None:
    """Make the import job called ``job_name`` end ``Failed`` with ``failure_message`` (test hook)."""
    _state(bedrock_backends[account_id][region]).scripted_failures[job_name] = failure_message


def script_converse_reply(
    imported_model_name: str,
    *,
    text: str,
    stop_reason: str = "end_turn",
    account_id: str = ACCOUNT_ID,
    region: str = REGION,
) -> None:
    """Make Converse on that imported model answer ``text`` with ``stop_reason`` (test hook)."""
    state = _state(bedrock_backends[account_id][region])
    state.scripted_replies[imported_model_name] = {"text": text, "stop_reason": stop_reason}


def _read_config(s3_uri: str, account_id: str) -> dict[str, Any] | None:
    """config.json from the emulated S3, or None when Bedrock could not read it."""
    bucket, _, prefix = s3_uri.removeprefix("s3://").partition("/")
    key = (prefix.rstrip("/") + "/" if prefix else "") + "config.json"
    try:
        obj = s3_backends[account_id]["aws"].get_object(bucket, key)
    except Exception:  # missing bucket or key: the job fails as Bedrock's does
        return None
    if obj is None:
        return None
    try:
        data = json.loads(obj.value)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _finish(backend: BedrockBackend, job: ImportJob) -> None:
    state = _state(backend)
    now = datetime.now(UTC)
    config = _read_config(job.s3_uri, backend.account_id)
    scripted = state.scripted_failures.get(job.name)
    job.ended = now
    if scripted is not None:
        job.status, job.failure_message = "Failed", scripted
    elif config is None:
        job.status = "Failed"
        job.failure_message = (
            f"Amazon Bedrock could not read config.json under {job.s3_uri}; check the files and the role."
        )
    else:
        job.status = "Completed"
        job.imported_model_arn = job.arn.replace(":model-import-job/", ":imported-model/")
        architectures = config.get("architectures") or ["unknown"]
        state.models[job.imported_model_arn] = ImportedModel(
            arn=job.imported_model_arn,
            name=job.imported_model_name,
            job=job,
            architecture=str(architectures[0]),
            created=now,
        )


def _job_by_identifier(backend: BedrockBackend, identifier: str) -> ImportJob:
    state = _state(backend)
    identifier = unquote(identifier)
    for job in state.jobs.values():
        if identifier in (job.name, job.arn):
            return job
    raise _ResourceNotFoundException(f"Model import job {identifier} not found.")


# ---------------------------------------------------------------- backend (bedrock)


def create_model_import_job(self: BedrockBackend, params: dict[str, Any]) -> str:
    state = _state(self)
    token = params.get("clientRequestToken")
    for job in state.jobs.values():
        if token is not None and job.token == token:
            return job.arn  # documented idempotency: same token, no new job, no error
    name, model_name, role = params.get("jobName", ""), params.get("importedModelName", ""), params.get("roleArn", "")
    s3_uri = params.get("modelDataSource", {}).get("s3DataSource", {}).get("s3Uri", "")
    problems = [
        f"Value '{value}' at '{member}' failed to satisfy constraint: {constraint}"
        for member, value, ok, constraint in (
            ("jobName", name, 1 <= len(name) <= 63 and _JOB_NAME.match(name), "Member must match the job-name pattern"),
            (
                "importedModelName",
                model_name,
                1 <= len(model_name) <= 63 and _MODEL_NAME.match(model_name),
                "Member must match the model-name pattern",
            ),
            ("roleArn", role, _ROLE_ARN.match(role), "Member must be an IAM role ARN"),
            ("modelDataSource.s3DataSource.s3Uri", s3_uri, s3_uri.startswith("s3://"), "Member must be an s3:// URI"),
        )
        if not ok
    ]
    if problems:
        raise _ValidationException(f"{len(problems)} validation error(s) detected: " + "; ".join(problems))
    if name in state.jobs:
        raise _ConflictException(f"A model import job named {name} already exists.")
    if any(m.name == model_name for m in state.models.values()):
        raise _ConflictException(f"An imported model named {model_name} already exists.")
    job_id = secrets.token_hex(6)
    job = ImportJob(
        arn=f"arn:aws:bedrock:{self.region_name}:{self.account_id}:model-import-job/{job_id}",
        name=name,
        imported_model_name=model_name,
        role_arn=role,
        s3_uri=s3_uri,
        token=token,
        created=datetime.now(UTC),
    )
    state.jobs[name] = job
    return job.arn


def get_model_import_job(self: BedrockBackend, identifier: str) -> ImportJob:
    job = _job_by_identifier(self, identifier)
    if job.status == "InProgress":
        if job.reads >= behaviour.polls_in_progress:
            _finish(self, job)
        job.reads += 1
    return job


def list_model_import_jobs(self: BedrockBackend, status: str | None, name_contains: str | None) -> list[ImportJob]:
    jobs = [
        j
        for j in _state(self).jobs.values()
        if (status is None or j.status == status) and (name_contains is None or name_contains in j.name)
    ]
    return sorted(jobs, key=lambda j: j.created, reverse=True)


def get_imported_model(self: BedrockBackend, identifier: str) -> ImportedModel:
    identifier = unquote(identifier)
    for model in _state(self).models.values():
        if identifier in (model.arn, model.name):
            return model
    raise _ResourceNotFoundException(f"Imported model {identifier} not found.")


# ---------------------------------------------------------------- responses (bedrock)


def _path_identifier(response: BedrockResponse, collection: str) -> str:
    # The identifier may be an ARN: botocore percent-encodes its '/' so take everything after the collection.
    path = unquote(response.path.split("?")[0])
    return path.split(f"/{collection}/", 1)[1]


def _r_create_model_import_job(self: BedrockResponse) -> ActionResult:
    job_arn = self.bedrock_backend.create_model_import_job(json.loads(self.body or "{}"))  # type: ignore[attr-defined]
    return ActionResult({"jobArn": job_arn})


def _r_get_model_import_job(self: BedrockResponse) -> ActionResult:
    job = self.bedrock_backend.get_model_import_job(_path_identifier(self, "model-import-jobs"))  # type: ignore[attr-defined]
    return ActionResult(job.describe())


def _r_list_model_import_jobs(self: BedrockResponse) -> ActionResult:
    params = self._get_params()
    jobs = self.bedrock_backend.list_model_import_jobs(params.get("statusEquals"), params.get("nameContains"))  # type: ignore[attr-defined]
    keys = ("jobArn", "jobName", "status", "lastModifiedTime", "creationTime", "endTime", "importedModelArn")
    summaries = [{k: v for k, v in j.describe().items() if k in keys} for j in jobs]
    return ActionResult({"modelImportJobSummaries": summaries})


def _r_get_imported_model(self: BedrockResponse) -> ActionResult:
    model = self.bedrock_backend.get_imported_model(_path_identifier(self, "imported-models"))  # type: ignore[attr-defined]
    return ActionResult(
        {
            "modelArn": model.arn,
            "modelName": model.name,
            "jobName": model.job.name,
            "jobArn": model.job.arn,
            "modelDataSource": {"s3DataSource": {"s3Uri": model.job.s3_uri}},
            "creationTime": model.created,
            "modelArchitecture": model.architecture,
            "instructSupported": True,
        }
    )


# ---------------------------------------------------------------- bedrock-runtime Converse


def converse(
    self: BedrockRuntimeBackend, model_id: str, messages: list[dict[str, Any]], max_tokens: int
) -> dict[str, Any]:
    backend = bedrock_backends[self.account_id][self.region_name]
    model = _state(backend).models.get(model_id)
    if model is None:
        raise _ResourceNotFoundException(
            f"emulator: Converse is emulated only for imported models; {model_id} is not one."
        )
    prompt = " ".join(block.get("text", "") for m in messages if m.get("role") == "user" for block in m["content"])
    scripted = _state(backend).scripted_replies.get(model.name)
    if scripted is not None:
        text, stop_reason = scripted["text"], scripted["stop_reason"]
    else:
        words = f"[emulated Converse: {model.name}] You asked: {prompt}".split()
        text = " ".join(words[:max_tokens])
        stop_reason = "max_tokens" if len(words) > max_tokens else "end_turn"
    usage = {"inputTokens": len(prompt.split()), "outputTokens": len(text.split())}
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": stop_reason,
        "usage": usage | {"totalTokens": usage["inputTokens"] + usage["outputTokens"]},
        "metrics": {"latencyMs": 1},
    }


def _r_converse(self: BedrockRuntimeResponse) -> ActionResult:
    model_id = self._get_param("modelId")
    messages = self._get_param("messages", [])
    max_tokens = int((self._get_param("inferenceConfig") or {}).get("maxTokens", 512))
    return ActionResult(self.bedrockruntime_backend.converse(unquote(model_id), messages, max_tokens))  # type: ignore[attr-defined]


def install() -> None:
    """Patch the operations into moto's bedrock and bedrock-runtime backends (idempotent)."""
    if getattr(BedrockBackend, "create_model_import_job", None) is create_model_import_job:
        return
    for name, fn in {
        "create_model_import_job": create_model_import_job,
        "get_model_import_job": get_model_import_job,
        "list_model_import_jobs": list_model_import_jobs,
        "get_imported_model": get_imported_model,
    }.items():
        setattr(BedrockBackend, name, fn)
    for name, fn in {
        "create_model_import_job": _r_create_model_import_job,
        "get_model_import_job": _r_get_model_import_job,
        "list_model_import_jobs": _r_list_model_import_jobs,
        "get_imported_model": _r_get_imported_model,
    }.items():
        setattr(BedrockResponse, name, fn)
    BedrockRuntimeBackend.converse = converse  # type: ignore[attr-defined]
    BedrockRuntimeResponse.converse = _r_converse  # type: ignore[attr-defined]
    state_task_service_aws_sdk._SERVICE_ERROR_NAMES["bedrock"] = "Bedrock"
