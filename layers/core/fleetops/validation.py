"""The one strict base model, the one way to list a pydantic error for people, and the one YAML file reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


class StrictModel(BaseModel):
    """Unknown fields are errors and instances are immutable: a typo in a request or a file is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def problems(exc: ValidationError, root: str = "request") -> list[str]:
    """One ``field.path: message`` line per problem; ``root`` names a problem with the whole value.

    Examples
    --------
    >>> class Step(StrictModel):
    ...     weight: int
    >>> try:
    ...     Step.model_validate({"weight": "ten", "extra": 1})
    ... except ValidationError as exc:
    ...     for line in problems(exc):
    ...         print(line)
    weight: Input should be a valid integer, unable to parse string as an integer
    extra: Extra inputs are not permitted
    """
    return [f"{'.'.join(map(str, e['loc'])) or root}: {e['msg']}" for e in exc.errors()]


def read_yaml_mapping(path: str | Path, what: str, error: type[ValueError]) -> dict[str, Any]:
    """The YAML file at ``path`` as a mapping; anything else raises ``error`` naming ``what`` and the file.

    Examples
    --------
    >>> read_yaml_mapping("/no/such/playbook.yaml", "playbook", ValueError)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: cannot read playbook /no/such/playbook.yaml: [Errno 2] No such file or directory: ...
    """
    # Imported here: every handler imports this module, most read no YAML file, and PyYAML costs a cold start ~10 ms.
    import yaml

    from fleetops.safe_yaml import SafeLoader

    try:
        raw = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=SafeLoader)
    except (OSError, yaml.YAMLError) as exc:
        raise error(f"cannot read {what} {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise error(f"{what} {path} must be a mapping, got {type(raw).__name__}")
    return raw
