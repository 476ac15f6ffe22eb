"""Shadow comparison: live requests the primary answered, replayed to the candidate at weight 0, compared.

With a rollout's ``shadow`` option, once the candidate gate has finished, the rollout switches the endpoint to a
config with SageMaker data capture for a sampled share of live requests (:mod:`fleetops.promotion.shadow_capture`):
the user gets the primary's answer as always, and SageMaker writes the request and that answer, encrypted with
the stack's capture key, to the capture bucket after answering (no added latency). After ``seconds`` the rollout
switches capture off again, then replays the captured requests to the candidate and the primary by variant name
and compares: both answers' errors and latency, and how similar the candidate's answer is to the one the user
got. The captures are deleted once compared. This module is the pure part: reading capture records, scoring,
judging.
"""

from __future__ import annotations

import base64
import difflib
import json
import statistics
import unicodedata
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from fleetops.promotion.reply import answer_text
from fleetops.promotion.shadow_spec import CONTROL_PLANE_INFERENCE_ID, ShadowSpec
from fleetops.validation import StrictModel


@dataclass(frozen=True)
class Captured:
    """One live exchange as SageMaker data capture recorded it: the request and the answer the user got."""

    event_id: str
    request: dict[str, Any]
    answer: str | None


@dataclass(frozen=True)
class Replayed:
    """One captured request replayed to both variants (``None``: that variant failed it)."""

    event_id: str
    user_answer: str | None
    candidate: str | None
    candidate_seconds: float
    primary: str | None
    primary_seconds: float


class ShadowComparison(StrictModel):
    passed: bool
    summary: str
    requests: int
    similarity: float | None
    primary_similarity: float | None = Field(
        description="the primary's replayed answers against the users' (the same model): what sampling alone gives"
    )
    candidate_errors: int
    primary_errors: int
    candidate_p95_ms: float | None
    primary_p95_ms: float | None


def _data(capture: dict[str, Any]) -> str:
    text = str(capture.get("data", ""))
    return base64.b64decode(text).decode() if capture.get("encoding") == "BASE64" else text


def _answer(payload: str) -> str | None:
    try:
        answer = json.loads(payload)
    except ValueError:
        return None
    return answer_text(answer) if isinstance(answer, dict) else None


def _from_control_plane(record: dict[str, Any]) -> bool:
    metadata = record.get("eventMetadata")
    inference_id = metadata.get("inferenceId") if isinstance(metadata, dict) else None
    return isinstance(inference_id, str) and inference_id.startswith(CONTROL_PLANE_INFERENCE_ID)


def parse_capture(jsonl: str) -> list[Captured]:
    """The users' chat requests in one data capture file (JSON lines); other lines are skipped.

    So is a record whose ``inferenceId`` starts with :data:`CONTROL_PLANE_INFERENCE_ID`: the control plane sent
    it (a candidate gate prompt), not a user.

    Examples
    --------
    >>> line = json.dumps({"captureData": {
    ...     "endpointInput": {"data": '{"messages": [{"role": "user", "content": "Hi"}]}', "encoding": "JSON"},
    ...     "endpointOutput": {"data": '{"choices": [{"message": {"content": "Hello"}}]}', "encoding": "JSON"}},
    ...     "eventMetadata": {"eventId": "e1"}})
    >>> parse_capture(line + "\\nnot json")
    [Captured(event_id='e1', request={'messages': [{'role': 'user', 'content': 'Hi'}]}, answer='Hello')]
    """
    found = []
    for line in jsonl.splitlines():
        try:
            record = json.loads(line)
            data = record["captureData"]
            request = json.loads(_data(data["endpointInput"]))
        except (ValueError, KeyError, TypeError):
            continue
        if _from_control_plane(record):
            continue
        if isinstance(request, dict) and isinstance(request.get("messages"), list):
            answer = _answer(_data(data.get("endpointOutput", {})))
            found.append(Captured(str(record.get("eventMetadata", {}).get("eventId", "")), request, answer))
    return found


def _normalised(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def similarity(first: str, second: str) -> float:
    """How alike two answers read, 0 to 1: difflib's ratio on the normalised characters (any language).

    Examples
    --------
    >>> similarity("Try Frieren.", "try  FRIEREN."), round(similarity("Try Frieren.", "Try Naruto."), 2)
    (1.0, 0.52)
    """
    return difflib.SequenceMatcher(None, _normalised(first), _normalised(second), autojunk=False).ratio()


def _p95_ms(seconds: list[float]) -> float | None:
    if not seconds:
        return None
    ordered = sorted(seconds)
    return round(ordered[max(0, -(-95 * len(ordered) // 100) - 1)] * 1000, 1)


def _mean_similarity(pairs: list[tuple[str | None, str | None]]) -> float | None:
    scores = [similarity(answer, user) for answer, user in pairs if answer and user]
    return round(statistics.fmean(scores), 3) if scores else None


def judge_shadow(replays: list[Replayed], spec: ShadowSpec) -> ShadowComparison:
    """The shadow gate: enough requests, the candidate as reliable, about as fast, and close to what users got.

    The primary's own replayed answers are scored the same way: with sampled decoding even the same model does
    not repeat itself, so that figure is the ceiling to set ``min_similarity`` against.
    """
    candidate_errors = sum(r.candidate is None for r in replays)
    primary_errors = sum(r.primary is None for r in replays)
    mean = _mean_similarity([(r.candidate, r.user_answer) for r in replays])
    reference = _mean_similarity([(r.primary, r.user_answer) for r in replays])
    candidate_p95 = _p95_ms([r.candidate_seconds for r in replays if r.candidate is not None])
    primary_p95 = _p95_ms([r.primary_seconds for r in replays if r.primary is not None])
    problems = []
    if len(replays) < spec.min_requests:
        problems.append(f"only {len(replays)} live requests captured, {spec.min_requests} needed")
    if replays and candidate_errors / len(replays) > spec.max_error_rate:
        problems.append(f"candidate failed {candidate_errors} of {len(replays)} (above {spec.max_error_rate:.1%})")
    if mean is None or mean < spec.min_similarity:
        problems.append(f"similarity {mean} below {spec.min_similarity}")
    if candidate_p95 and primary_p95 and candidate_p95 > spec.max_latency_ratio * primary_p95:
        problems.append(
            f"p95 {candidate_p95:.0f} ms above {spec.max_latency_ratio:g} x the primary's {primary_p95:.0f}"
        )
    numbers = (
        f"{len(replays)} live requests replayed: similarity to the users' answers {mean} (min {spec.min_similarity}; "
        f"the primary's own {reference}), "
        f"errors {candidate_errors} (primary {primary_errors}), p95 {candidate_p95} ms (primary {primary_p95} ms)"
    )
    return ShadowComparison(
        passed=not problems,
        summary=("shadow passed: " if not problems else "shadow failed: " + "; ".join(problems) + ". ") + numbers,
        requests=len(replays),
        similarity=mean,
        primary_similarity=reference,
        candidate_errors=candidate_errors,
        primary_errors=primary_errors,
        candidate_p95_ms=candidate_p95,
        primary_p95_ms=primary_p95,
    )
