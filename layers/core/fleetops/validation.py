"""The one strict base model and the one way to list a pydantic error for people."""

from __future__ import annotations

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
