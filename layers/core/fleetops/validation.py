"""The one strict base model, the one way to list a pydantic error for people, the one YAML file reader, and the
one check of a time zone's name."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, ValidationError


class StrictModel(BaseModel):
    """Unknown fields are errors and instances are immutable: a typo in a request or a file is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def check_zone(value: str) -> str:
    """``value`` if it names an IANA time zone (a field validator), else a ValueError saying what to use."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {value!r} (use an IANA name such as 'Asia/Tokyo')") from exc
    return value


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


def read_yaml_mapping(
    path: str | Path, what: str, error: type[ValueError], *, unique_keys: bool = False
) -> dict[str, Any]:
    """The YAML file at ``path`` as a mapping; anything else raises ``error`` naming ``what`` and the file.

    Its compiled copy is used while fresh (:mod:`fleetops.compiled_yaml`: no PyYAML at a deployed cold start);
    ``unique_keys`` refuses a key given twice (a compiled copy has none).

    Examples
    --------
    >>> read_yaml_mapping("/no/such/playbook.yaml", "playbook", ValueError)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: cannot read playbook /no/such/playbook.yaml: [Errno 2] No such file or directory: ...
    """
    from fleetops.compiled_yaml import read_compiled

    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc}") from exc
    raw = read_compiled(Path(path), text)
    if raw is None:
        raw = _parse_yaml(text, path, what, error, unique_keys)
    if not isinstance(raw, dict):
        raise error(f"{what} {path} must be a mapping, got {type(raw).__name__}")
    return raw


def _parse_yaml(text: bytes, path: str | Path, what: str, error: type[ValueError], unique_keys: bool) -> Any:
    # Imported here: a deployed handler reads compiled copies, and PyYAML costs a cold start ~10 ms.
    import yaml

    from fleetops.safe_yaml import SafeLoader, UniqueKeySafeLoader

    try:
        return yaml.load(text.decode("utf-8"), Loader=UniqueKeySafeLoader if unique_keys else SafeLoader)
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise error(f"cannot read {what} {path}: {exc}") from exc
