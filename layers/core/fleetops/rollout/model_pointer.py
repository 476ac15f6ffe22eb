"""The model-version pointer of an endpoint: one SSM String parameter holding a JSON :class:`Pointer`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError

from fleetops.aws import clients
from fleetops.aws.retry import error_code
from fleetops.rollout.pointer import Pointer

if TYPE_CHECKING:
    from mypy_boto3_ssm import SSMClient


def pointer_parameter(prefix: str, endpoint_name: str) -> str:
    """The parameter name of an endpoint's pointer.

    Examples
    --------
    >>> pointer_parameter("/manga-llm-fleet/models", "manga-chat")
    '/manga-llm-fleet/models/manga-chat'
    """
    return f"{prefix.rstrip('/')}/{endpoint_name}"


class ModelPointerStore:
    def __init__(self, client: SSMClient | None = None) -> None:
        self._client = client or clients.client("ssm")

    def get(self, name: str) -> Pointer | None:
        """The pointer, or ``None`` when the parameter is missing or holds something else."""
        try:
            value = self._client.get_parameter(Name=name)["Parameter"]["Value"]
        except Exception as exc:
            if error_code(exc) == "ParameterNotFound":
                return None
            raise
        try:
            return Pointer.model_validate_json(value)
        except ValidationError:
            return None
