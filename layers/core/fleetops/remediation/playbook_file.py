"""Reading ``playbook.yaml``: as a mapping for the whole playbook (:func:`fleetops.remediation.models.load_playbook`),
or its rails alone, which is all pre-scaling uses (the raise hold)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fleetops.remediation.rails import Rails
from fleetops.validation import read_yaml_mapping


class PlaybookError(ValueError):
    """The playbook file cannot be used (unreadable, not YAML, or invalid)."""


def read_playbook(path: str | Path) -> dict[str, Any]:
    """The playbook file as a mapping, not yet validated; an unreadable file raises :class:`PlaybookError`."""
    return read_yaml_mapping(path, "playbook", PlaybookError)


def load_rails(path: str | Path) -> Rails:
    """Read and validate the ``rails`` section of ``playbook.yaml`` only.

    Examples
    --------
    >>> import fleetops
    >>> shipped = Path(fleetops.__file__).parents[1] / "fleet_config"  # beside the package, as in the layer
    >>> load_rails(shipped / "playbook.yaml").raise_hold.total_seconds()
    900.0
    """
    raw = read_playbook(path)
    try:
        return Rails.model_validate(raw.get("rails"))
    except ValidationError as exc:
        found = "; ".join(f"{'.'.join(map(str, ('rails', *e['loc'])))}: {e['msg']}" for e in exc.errors())
        raise PlaybookError(f"invalid playbook {path}: {found}") from exc
