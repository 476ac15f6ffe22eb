"""Smoke test of an imported model: a few prompts through Converse; every answer must be usable text."""

from __future__ import annotations

from collections.abc import Callable

from fleetops.bedrock.models import PromptResult, Reply, SmokeTestReport, SmokeTestRequest

#: Stop reasons that mean the model produced a usable answer (Converse API reference, StopReason).
GOOD_STOP_REASONS = frozenset({"end_turn", "max_tokens", "stop_sequence"})

Ask = Callable[[str, str, int], Reply]  # (model_arn, prompt, max_tokens) -> Reply


class SmokeTestError(Exception):
    """The imported model answered badly or not at all; the message names each failing prompt."""

    def __init__(self, report: SmokeTestReport):
        self.report = report
        failed = [r for r in report.results if not r.ok]
        listed = "; ".join(f"{r.prompt[:40]!r}: {r.detail}" for r in failed)
        super().__init__(
            f"{len(failed)} of {len(report.results)} smoke prompt(s) failed on {report.imported_model_arn}: {listed}"
        )


def judge(prompt: str, reply: Reply) -> PromptResult:
    """One prompt's verdict.

    Examples
    --------
    >>> judge("hi", Reply(text="", stop_reason="end_turn")).detail
    'empty answer'
    """
    if reply.stop_reason not in GOOD_STOP_REASONS:
        return PromptResult(prompt=prompt, ok=False, detail=f"stop reason {reply.stop_reason!r}", reply=reply)
    if not reply.text.strip():
        return PromptResult(prompt=prompt, ok=False, detail="empty answer", reply=reply)
    return PromptResult(prompt=prompt, ok=True, detail="ok", reply=reply)


def run_smoke_test(request: SmokeTestRequest, ask: Ask) -> SmokeTestReport:
    """Ask every prompt; return the report, or raise :class:`SmokeTestError` if any prompt failed.

    Errors from ``ask`` (after the adapter's own retries) count as a failed prompt, so one bad
    prompt does not hide the others.

    Examples
    --------
    >>> req = SmokeTestRequest(imported_model_arn="arn:aws:bedrock:us-east-1:123456789012:imported-model/x",
    ...                        prompts=("hi",))
    >>> run_smoke_test(req, lambda arn, p, n: Reply(text="hello", stop_reason="end_turn")).verdict
    'passed'
    """
    if not request.converse_supported:
        return SmokeTestReport(
            imported_model_arn=request.imported_model_arn,
            verdict="skipped",
            reason="the architecture does not support Converse; test it with InvokeModel by hand",
        )
    results: list[PromptResult] = []
    for prompt in request.prompts:
        try:
            results.append(judge(prompt, ask(request.imported_model_arn, prompt, request.max_tokens)))
        except Exception as exc:
            results.append(PromptResult(prompt=prompt, ok=False, detail=f"{type(exc).__name__}: {exc}"))
    report = SmokeTestReport(imported_model_arn=request.imported_model_arn, verdict="passed", results=tuple(results))
    if not all(r.ok for r in results):
        raise SmokeTestError(report.model_copy(update={"verdict": "failed"}))
    return report
