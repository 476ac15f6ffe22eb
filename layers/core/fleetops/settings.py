"""Environment settings shared by every Lambda, parsed once at cold start."""

from __future__ import annotations

import os
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class SettingsError(RuntimeError):
    """A function's environment is wrong; raised at cold start with every problem listed."""


class CommonSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    audit_table: str = Field(min_length=1)
    lease_table: str = ""
    kill_switch_parameter: str = ""
    notification_topic_arn: str = ""
    dry_run: bool = False
    environment_name: Literal["dev", "prod"] | None = None  # the stack's; None: every endpoint in fleet.yaml
    fleet_config_path: str = "/opt/python/fleet_config/fleet.yaml"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Self:
        """Read fields from upper-cased environment variables of the same name.

        Examples
        --------
        >>> CommonSettings.from_env({"AUDIT_TABLE": "audit", "DRY_RUN": "true"}).dry_run
        True
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {name: env[name.upper()] for name in cls.model_fields if name.upper() in env}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            missing = ", ".join(f"{'.'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors())
            raise SettingsError(f"{cls.__name__}: bad environment: {missing}") from exc
