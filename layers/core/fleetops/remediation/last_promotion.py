"""Read an endpoint's last promotion from its model pointer (SSM), for the watch window after a promotion."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError

from fleetops.aws import clients
from fleetops.aws.retry import error_code
from fleetops.remediation.watch_window import Promotion
from fleetops.rollout.model_pointer import pointer_parameter
from fleetops.rollout.pointer import Pointer

if TYPE_CHECKING:
    from mypy_boto3_ssm import SSMClient


class LastPromotion:
    """The promotion the endpoint's pointer records, with when SSM says it was written (``LastModifiedDate``).

    Only the promotion (``UpdatePointer`` of the canary rollout) and the rollback (``RestorePointer``) write the
    pointer; a restored pointer names no previous config, so it reads as no promotion to undo (``None``), as do a
    missing parameter and one that holds no pointer.
    """

    def __init__(self, pointer_prefix: str, client: SSMClient | None = None) -> None:
        if not pointer_prefix:
            raise ValueError("LastPromotion needs the model pointer prefix (MODEL_POINTER_PREFIX)")
        self._prefix = pointer_prefix
        self._client = client or clients.client("ssm")

    def get(self, endpoint_name: str) -> Promotion | None:
        try:
            parameter = self._client.get_parameter(Name=pointer_parameter(self._prefix, endpoint_name))["Parameter"]
        except Exception as exc:
            if error_code(exc) == "ParameterNotFound":
                return None
            raise
        try:
            pointer = Pointer.model_validate_json(parameter["Value"])
        except ValidationError:
            return None
        if not pointer.previous_endpoint_config_name:
            return None
        return Promotion(
            promoted_at=parameter["LastModifiedDate"],
            version=pointer.version,
            previous_version=pointer.previous_version,
            endpoint_config_name=pointer.endpoint_config_name,
        )
