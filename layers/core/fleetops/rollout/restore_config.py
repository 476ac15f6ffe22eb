"""The endpoint config a rollback restores: a copy of its target config with the instances serving now.

An old config put back as it was created brings its own ``InitialInstanceCount``: an endpoint an alarm scaled out
during an incident would drop to that count in the middle of it. So a rollback never restores its target as is; it
restores a copy (:mod:`fleetops.rollout.config_copy`: every field and tag) whose variants run what the endpoint
runs for them now, never fewer than the target's own count (a variant not serving keeps that count).

The copy is named after the config it restores (``<target>-restore-<UTC yymmddHHMMSS>``), so an operator reads
which release serves, and every later check of the rollback accepts it as the target (:func:`restores`). A copy
of a copy keeps one mark: it is named, and recognised, by the config the first copy restored.

Examples
--------
>>> from datetime import UTC, datetime
>>> name = restore_config_name("manga-chat", "manga-chat-v6-config", datetime(2026, 11, 27, 6, 30, tzinfo=UTC))
>>> name
'manga-chat-v6-config-restore-261127063000'
>>> restores("manga-chat", name, "manga-chat-v6-config"), restores("manga-chat", name, "manga-chat-v5-config")
(True, False)
>>> restore_config_name("manga-chat", name, datetime(2026, 11, 28, 0, 0, tzinfo=UTC))
'manga-chat-v6-config-restore-261128000000'
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

from fleetops.rollout.config_copy import ConfigPlan

#: Between the restored config's name and the time of the restore.
RESTORE_MARK = "-restore-"
_STAMP = "%y%m%d%H%M%S"
_STAMP_LEN = 12
#: SageMaker's longest endpoint config name.
MAX_NAME_LEN = 63
_COPY = re.compile(rf"^(?P<stem>.+){re.escape(RESTORE_MARK)}\d{{{_STAMP_LEN}}}$")


def _stem(endpoint_name: str, config_name: str) -> str:
    """What a copy of ``config_name`` is named after: the first restored config's name, under the endpoint's."""
    copied = _COPY.match(config_name)
    if copied:
        return copied["stem"]
    # The stack may create configs under its endpoint's name only (template.yaml).
    stem = config_name if config_name.startswith(f"{endpoint_name}-") else f"{endpoint_name}-{config_name}"
    room = MAX_NAME_LEN - len(RESTORE_MARK) - _STAMP_LEN
    if len(stem) > room:
        # Cut, with a digest of the whole name, so two long names never share a copy's stem.
        stem = f"{stem[: room - 7]}-{hashlib.sha256(stem.encode()).hexdigest()[:6]}"
    return stem


def restore_config_name(endpoint_name: str, target: str, now: datetime) -> str:
    """The copy's name: the target's (or, for a copy, what it restored), and when (UTC); at most 63 characters."""
    return f"{_stem(endpoint_name, target)}{RESTORE_MARK}{now.astimezone(UTC).strftime(_STAMP)}"


def restores(endpoint_name: str, config_name: str, target: str) -> bool:
    """Whether an endpoint on ``config_name`` serves ``target``: the config itself, or a rollback's copy of it.

    Examples
    --------
    >>> restores("e", "e-v6-config", "e-v6-config"), restores("e", "e-v7-final", "e-v6-config")
    (True, False)
    >>> restores("e", "e-v6-config-restore-261127063000", "e-v6-config-restore-261101000000")
    True
    """
    if config_name == target:
        return True
    return bool(_COPY.match(config_name)) and _stem(endpoint_name, config_name) == _stem(endpoint_name, target)


def restore_plan(endpoint_name: str, target: str, now: datetime) -> ConfigPlan:
    """How the EndpointConfigFunction builds the copy: the target's variants, weights and fields, live counts."""
    return ConfigPlan(
        endpoint_name=endpoint_name,
        endpoint_config_name=restore_config_name(endpoint_name, target, now),
        source_config_name=target,
        copy_variants=True,
        copied_weights="source",
        source_count_floor=True,
    )
