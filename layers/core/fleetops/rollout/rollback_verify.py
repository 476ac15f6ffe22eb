"""A rollback checks itself: once the endpoint is back on its config, its answers must name the restored version.

The endpoint is asked a few times with a tiny prompt, as users ask it (no ``TargetVariant``, so the weights
route it): a canary still taking traffic, a config SageMaker did not really switch to, or a model recreated
under the restored config's model name with another build all answer with another ``backend.version`` (the
gateway names its ``MODEL_VERSION`` in every answer). The version expected is, in order: the release the
rollback restores (its restore pointer), the live pointer's release when the pointer names the target config,
else the ``MODEL_VERSION`` the target config's models carry.

Examples
--------
>>> restored = '{"model": "manga-llama", "version": "v6", "sagemaker_model": "unknown", "endpoint_config_name": "c6"}'
>>> expected_version(restored, None, "c6", {})
'v6'
>>> verdict = judge("v6", [Answer(version="v6"), Answer(version="v7"), Answer(error="ModelError: 500")], "e", "c6")
>>> verdict.passed, verdict.reason
(False, "endpoint e is back on c6, but 2 of 3 answers do not name v6, the restored release's version: \
1 named v7; 1 failed (ModelError: 500)")
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleetops.rollout.pointer import Pointer
from fleetops.rollout.restore_config import restores

#: How many times the endpoint is asked: enough that a canary left at a fair share of traffic is met.
VERIFY_ATTEMPTS = 5
#: The tiny prompt: one token is enough for the gateway to name its version.
VERIFY_PROMPT: dict[str, Any] = {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
#: A restore pointer of a pointer that recorded no previous version says this (``Pointer.restored``).
UNKNOWN_VERSION = "unknown"


class VerifyRequest(BaseModel):
    """What the state machine passes once the endpoint serves the target config (its ``finish`` step's fields)."""

    model_config = ConfigDict(frozen=True)

    endpoint_name: str = Field(min_length=1)
    target_endpoint_config_name: str = Field(min_length=1)
    pointer_json: str | None = None


class Answer(BaseModel):
    """One answer: the version it named (``None``: none), or why there was no answer."""

    model_config = ConfigDict(frozen=True)

    version: str | None = None
    error: str = ""


class Verdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    passed: bool
    expected_version: str | None
    versions: tuple[str | None, ...]
    reason: str


def _release_version(pointer_json: str | None) -> str | None:
    if not pointer_json:
        return None
    try:
        version = Pointer.model_validate_json(pointer_json).version
    except ValidationError:
        return None
    return None if version == UNKNOWN_VERSION else version


def expected_version(
    pointer_json: str | None,
    live: Pointer | None,
    target_config: str,
    config_versions: Mapping[str, str | None],
    endpoint_name: str = "",
) -> str | None:
    """The version the endpoint must answer with once on ``target_config``; ``None`` when nothing says.

    ``config_versions``: the ``MODEL_VERSION`` of each variant's model in the target config (variant -> version).
    A live pointer naming the target or a rollback's copy of it (the same models) names the version.

    Examples
    --------
    >>> expected_version(None, None, "c6", {"primary": "v6"})
    'v6'
    >>> expected_version(None, None, "c6", {"primary": "v6", "canary": "v7"}) is None
    True
    """
    restored = _release_version(pointer_json)
    if restored:
        return restored
    names_target = live is not None and restores(endpoint_name, live.endpoint_config_name, target_config)
    if live is not None and names_target and live.version != UNKNOWN_VERSION:
        return live.version
    named = {v for v in config_versions.values() if v}
    return named.pop() if len(named) == 1 else None


def answered_version(payload: Any) -> str | None:
    """``backend.version`` of a gateway answer (``None`` when it names none).

    Examples
    --------
    >>> answered_version({"backend": {"version": "v6", "adapter": "general_support"}, "choices": []})
    'v6'
    >>> answered_version({"choices": []}) is None
    True
    """
    backend = payload.get("backend") if isinstance(payload, dict) else None
    version = backend.get("version") if isinstance(backend, dict) else None
    return version if isinstance(version, str) and version else None


def judge(expected: str | None, answers: Sequence[Answer], endpoint: str, config: str) -> Verdict:
    """Passed only when every answer names ``expected``; the reason says what came back instead."""
    versions = tuple(a.version for a in answers)
    if expected is None:
        reason = (
            f"endpoint {endpoint} is back on {config}, but nothing says which version it should serve (no restore "
            "pointer, the model pointer names another config, and its models' MODEL_VERSION is not one version)"
        )
        return Verdict(passed=False, expected_version=None, versions=versions, reason=reason)
    wrong = [a for a in answers if a.version != expected]
    if answers and not wrong:
        reason = f"endpoint {endpoint} on {config}: {len(answers)} of {len(answers)} answers name {expected}"
        return Verdict(passed=True, expected_version=expected, versions=versions, reason=reason)
    named = Counter(a.version or "no version" for a in wrong if not a.error)
    failed = [a.error for a in wrong if a.error]
    parts = [", ".join(f"{n} named {v}" for v, n in sorted(named.items()))] if named else []
    if failed:
        parts.append(f"{len(failed)} failed ({'; '.join(sorted(set(failed)))})")
    reason = (
        f"endpoint {endpoint} is back on {config}, but {len(wrong)} of {len(answers)} answers do not name "
        f"{expected}, the restored release's version: {'; '.join(parts) or 'no answer'}"
    )
    return Verdict(passed=False, expected_version=expected, versions=versions, reason=reason)


def verify_rollback(
    request: VerifyRequest,
    ask: Callable[[], Sequence[Answer]],
    live: Pointer | None,
    config_versions: Callable[[str], Mapping[str, str | None]],
) -> Verdict:
    """Ask the endpoint (``ask``) and judge its answers against the version :func:`expected_version` names.

    ``config_versions`` (DescribeEndpointConfig + DescribeModel) is read only when neither pointer names the version.

    Examples
    --------
    >>> request = VerifyRequest(endpoint_name="e", target_endpoint_config_name="c6")
    >>> verify_rollback(request, lambda: [Answer(version="v6")] * 3, None, lambda c: {"primary": "v6"}).reason
    'endpoint e on c6: 3 of 3 answers name v6'
    """
    target = request.target_endpoint_config_name
    expected = expected_version(request.pointer_json, live, target, {}, request.endpoint_name)
    if expected is None:
        expected = expected_version(None, None, target, config_versions(target))
    return judge(expected, ask(), request.endpoint_name, target)
