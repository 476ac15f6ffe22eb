"""Canary rollout, before the lease: the model artifact gate. Reads the artifact and pins the copy it checked.

Event (from the state machine): ``{"model_data_url", "model", "version", "sha256", "adapters"}`` of the plan.
The ``model.tar.gz`` is streamed from S3 (no disk) and checked (:mod:`fleetops.promotion.artifact`): safetensors
only, config, tokenizer and weights that load, adapters that fit the engine and the base, the checksums the
request names, and the gate's caps on entries and bytes. A pass copies the object version it read to
``verified/sha256/<its sha256>/model.tar.gz`` (:mod:`fleetops.promotion.artifact_pin`), whose URL
(``pinned_url``) the state machine gives both models as their ``ModelDataUrl``. A failed gate raises
``ArtifactRefusedError`` (every problem) or ``ArtifactFetchError`` (unreadable, or past a cap); the rollout
then ends, refused, before it takes the lease or creates anything.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Tracer
from pydantic import BaseModel

from fleetops.aws import clients
from fleetops.promotion.artifact_pin import gate_s3_artifact
from fleetops.rollout.versions import AdapterVersion, Release

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from mypy_boto3_s3 import S3Client

logger = Logger()
tracer = Tracer()


class Event(BaseModel):
    model_data_url: str
    model: str
    version: str
    sha256: str
    adapters: dict[str, AdapterVersion] | None = None


@cache
def dependencies() -> S3Client:
    """The S3 adapter, built once per execution environment on its first invocation."""
    return clients.client("s3")


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    parsed = Event.model_validate(event)
    release = Release(model=parsed.model, version=parsed.version, sha256=parsed.sha256, adapters=parsed.adapters)
    result = gate_s3_artifact(dependencies(), parsed.model_data_url, release)
    logger.info(
        "artifact passed and pinned",
        extra={"model_data_url": parsed.model_data_url, "pinned_url": result.pinned_url, "files": result.files},
    )
    return result.model_dump(mode="json")
