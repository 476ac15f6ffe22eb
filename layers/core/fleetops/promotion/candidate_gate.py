"""The pre-traffic gate: a load test and the evaluation suite against the canary variant at weight 0.

The rollout runs it once the canary is InService and before any user is routed to it. Requests go to one
variant by name (SageMaker's ``TargetVariant``), so users never meet them and the gate never meets users:

- **load test**: can the candidate serve ``load_requests`` requests at once, every one answered, the slowest
  within the fleet's latency SLO;
- **evaluation**: every suite prompt, asked of the candidate and of the primary with greedy decoding, scored by
  :func:`fleetops.promotion.evaluation.judge` (per set and language, and against the primary on the same
  prompts).

Pure apart from ``invoke``, which the caller gives (:mod:`fleetops.promotion.endpoint_invoke` on AWS).
"""

from __future__ import annotations

import statistics
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import Field

from fleetops.promotion.eval_suite import EvalSuite, Prompt
from fleetops.promotion.evaluation import judge
from fleetops.promotion.reply import Invoke
from fleetops.validation import StrictModel

#: An eval answer long enough to name a title or two; longer answers only cost time.
EVAL_MAX_TOKENS = 48
LOAD_MAX_TOKENS = 32


class LoadTestResult(StrictModel):
    requests: int
    failed: int
    p50_ms: float
    max_ms: float
    latency_limit_ms: float
    passed: bool
    reason: str


class EvalSummary(StrictModel):
    suite_version: str
    passed: bool
    reason: str
    candidate_pass_rate: dict[str, float] = Field(description="by set/language, e.g. safety/ja")
    primary_pass_rate: dict[str, float] | None
    failed_prompts: list[str] = Field(description="each as '<id>: what its answer lacked or invented'")


class CandidateGateResult(StrictModel):
    """The gate's verdict; ``summary`` is what the rollout's failure (and its rollback's reason) says."""

    passed: bool
    summary: str
    load_test: LoadTestResult
    evaluation: EvalSummary | None = Field(description="None when the load test failed (not evaluated)")
    requests_to_candidate: int
    requests_to_primary: int


def body(prompt: Prompt, max_tokens: int) -> dict[str, Any]:
    """The chat request for one suite prompt: greedy, so the same model always gives the same answer."""
    request: dict[str, Any] = {"messages": prompt.chat_messages(), "max_tokens": max_tokens, "temperature": 0}
    if prompt.adapter:
        request["adapter"] = prompt.adapter
    return request


def load_test(invoke: Invoke, variant: str, bodies: list[dict[str, Any]], latency_limit_ms: float) -> LoadTestResult:
    """All ``bodies`` at once to ``variant``: passes when every one is answered within the limit."""
    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        replies = list(pool.map(lambda b: invoke(variant, b), bodies))
    failed = [r for r in replies if not r.ok]
    times = [r.seconds * 1000 for r in replies]
    slowest = max(times)
    reasons = []
    if failed:
        first = failed[0]
        reasons.append(f"{len(failed)} of {len(replies)} failed (first: status {first.status} {first.error})")
    if slowest > latency_limit_ms:
        reasons.append(f"slowest answer {slowest:.0f} ms above the latency SLO {latency_limit_ms:.0f} ms")
    return LoadTestResult(
        requests=len(replies),
        failed=len(failed),
        p50_ms=round(statistics.median(times), 1),
        max_ms=round(slowest, 1),
        latency_limit_ms=latency_limit_ms,
        passed=not reasons,
        reason="; ".join(reasons) or f"{len(replies)} answered, slowest {slowest:.0f} ms",
    )


def ask_suite(invoke: Invoke, variant: str, suite: EvalSuite, workers: int) -> dict[str, str | None]:
    """Every suite prompt's answer from ``variant`` (``None`` where it did not answer)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        replies = list(pool.map(lambda p: invoke(variant, body(p, EVAL_MAX_TOKENS)), suite.prompts))
    return {p.id: r.text if r.ok else None for p, r in zip(suite.prompts, replies, strict=True)}


def gate_candidate(
    invoke: Invoke,
    suite: EvalSuite,
    *,
    candidate: str,
    primary: str | None,
    latency_limit_ms: float,
    load_requests: int = 10,
    workers: int = 4,
) -> CandidateGateResult:
    """Load-test the candidate variant, then evaluate it (beside ``primary`` when there is one).

    Examples
    --------
    >>> from fleetops.promotion.eval_suite import load_eval_suite
    >>> from fleetops.promotion.reply import Reply
    >>> parrot = lambda variant, request: Reply(200, request["messages"][-1]["content"], 0.01)
    >>> result = gate_candidate(parrot, load_eval_suite(), candidate="canary", primary=None, latency_limit_ms=500)
    >>> result.passed, result.load_test.passed, result.summary[:70]
    (False, True, 'evaluation failed: candidate: knowledge/en failed: pass rate 3% (1/30)')
    """
    prompts = suite.prompts
    bodies = [body(prompts[i % len(prompts)], LOAD_MAX_TOKENS) for i in range(load_requests)]
    load = load_test(invoke, candidate, bodies, latency_limit_ms)
    if not load.passed:
        return CandidateGateResult(
            passed=False,
            summary=f"load test failed on {candidate}: {load.reason}",
            load_test=load,
            evaluation=None,
            requests_to_candidate=load.requests,
            requests_to_primary=0,
        )
    answers = ask_suite(invoke, candidate, suite, workers)
    primary_answers = ask_suite(invoke, primary, suite, workers) if primary else None
    verdict = judge(suite, answers, primary_answers)
    evaluation = EvalSummary(
        suite_version=suite.version,
        passed=verdict.passed,
        reason=verdict.reason,
        candidate_pass_rate={key: s.pass_rate for key, s in verdict.candidate.groups.items()},
        primary_pass_rate=None
        if verdict.primary is None
        else {key: s.pass_rate for key, s in verdict.primary.groups.items()},
        failed_prompts=[r.reason() for r in verdict.candidate.prompts if not r.passed],
    )
    prefix = "passed" if verdict.passed else "evaluation failed"
    return CandidateGateResult(
        passed=verdict.passed,
        summary=f"{prefix}: {verdict.reason}. Load test: {load.reason}",
        load_test=load,
        evaluation=evaluation,
        requests_to_candidate=load.requests + len(prompts),
        requests_to_primary=len(prompts) if primary else 0,
    )
