"""The offline evaluation's scorer: a model's answers to the suite in, a verdict with its reasons out.

Pure: the answers are fetched elsewhere, so the same answers always give the same verdict. Each prompt passes
when its answer holds what the prompt requires and invents no more titles than its language allows (how a
title is found: :mod:`fleetops.promotion.titles`); each language is judged on its own prompts against its
own thresholds, so a good English score cannot hide a bad Japanese one; and a candidate is compared with the
primary on the same prompts, per language, so it may not lose more than the suite's margin to the model it
replaces.
"""

from __future__ import annotations

from collections.abc import Mapping

from fleetops.promotion.eval_suite import EvalSuite, Language, Prompt
from fleetops.promotion.titles import marked_titles, mentions, name_forms, normalise
from fleetops.validation import StrictModel

# Pass rates are ratios of small counts: a drop of exactly the margin must not fail on a rounding error.
_EPSILON = 1e-9
_SHOWN_ALTERNATIVES = 3


class EvaluationError(ValueError):
    """Answers or results that do not belong to the suite: scoring them would judge a different suite."""


class PromptResult(StrictModel):
    """One prompt's outcome: what its answer lacked and which titles it invented (as the answer wrote them)."""

    id: str
    language: Language
    answered: bool
    passed: bool
    missing: list[str]
    hallucinated: list[str]

    def reason(self) -> str:
        """The prompt's problems in one line, e.g. ``ja-03: missing 鬼滅の刃; hallucinated 『炎の剣士』``."""
        if not self.answered:
            return f"{self.id}: no answer"
        parts = [f"missing {item}" for item in self.missing]
        if self.hallucinated:
            parts.append("hallucinated " + ", ".join(self.hallucinated))
        return f"{self.id}: " + ("; ".join(parts) or "passed")


class LanguageScore(StrictModel):
    """One language's prompts judged together against that language's thresholds."""

    language: Language
    prompts: int
    passed_prompts: int
    pass_rate: float
    hallucinated: int
    passed: bool
    problems: list[str]


class EvaluationResult(StrictModel):
    """A model's answers to the whole suite: per prompt, per language, the verdict and why."""

    suite_version: str
    passed: bool
    reason: str
    languages: dict[Language, LanguageScore]
    prompts: list[PromptResult]


class LanguageComparison(StrictModel):
    """The candidate's pass rate in one language next to the primary's on the same prompts."""

    language: Language
    candidate_pass_rate: float
    primary_pass_rate: float
    max_drop: float
    passed: bool
    regressions: list[str]


class Comparison(StrictModel):
    """The candidate against the primary, per language."""

    passed: bool
    reason: str
    languages: dict[Language, LanguageComparison]


class Verdict(StrictModel):
    """The offline evaluation's answer: whether the candidate may go on to its canary, and why."""

    passed: bool
    reason: str
    candidate: EvaluationResult
    primary: EvaluationResult | None
    comparison: Comparison | None


def score_prompt(suite: EvalSuite, prompt: Prompt, answer: str | None) -> PromptResult:
    """One answer judged against its prompt (``None``: the model gave no answer, which fails the prompt).

    Examples
    --------
    >>> from fleetops.promotion.eval_suite import load_eval_suite
    >>> suite = load_eval_suite()
    >>> ja_03 = next(p for p in suite.prompts if p.id == "ja-03")
    >>> score_prompt(suite, ja_03, "『鬼滅の刃』です。").passed
    True
    >>> score_prompt(suite, ja_03, "『炎の剣士』という漫画です。").reason()
    'ja-03: missing 鬼滅の刃; hallucinated 『炎の剣士』'
    """
    if answer is None or not answer.strip():
        return PromptResult(
            id=prompt.id, language=prompt.language, answered=False, passed=False, missing=[], hallucinated=[]
        )
    missing = _missing(suite, prompt, answer)
    invented = _invented(suite, prompt, answer)
    allowed = suite.thresholds[prompt.language].max_hallucinated_per_answer
    return PromptResult(
        id=prompt.id,
        language=prompt.language,
        answered=True,
        passed=not missing and len(invented) <= allowed,
        missing=missing,
        hallucinated=invented,
    )


def _missing(suite: EvalSuite, prompt: Prompt, answer: str) -> list[str]:
    """What the answer lacks, each as a reason shows it (a title by its name in the prompt's language)."""

    def title_named(key: str) -> bool:
        return mentions(answer, suite.catalogue[key].names())

    missing = [suite.catalogue[key].shown(prompt.language) for key in prompt.titles_all if not title_named(key)]
    if prompt.titles_any and not any(title_named(key) for key in prompt.titles_any):
        missing.append(_one_of([suite.catalogue[key].shown(prompt.language) for key in prompt.titles_any]))
    missing += [term for term in prompt.terms_all if not mentions(answer, [term])]
    if prompt.terms_any and not any(mentions(answer, [term]) for term in prompt.terms_any):
        missing.append(_one_of(prompt.terms_any))
    return missing


def _one_of(items: list[str]) -> str:
    shown = ", ".join(items[:_SHOWN_ALTERNATIVES])
    more = len(items) - _SHOWN_ALTERNATIVES
    return f"one of {shown}" + (f" (+{more} more)" if more > 0 else "")


def _invented(suite: EvalSuite, prompt: Prompt, answer: str) -> list[str]:
    """The titles the answer marks that are neither in the catalogue, nor known non-titles, nor the prompt's."""
    known = {normalise(name) for title in suite.catalogue.values() for name in title.names()}
    ignored = {normalise(phrase) for phrase in suite.not_titles}
    asked = normalise(prompt.text())
    return [
        title.marked
        for title in marked_titles(answer)
        if not name_forms(title.text) & known
        and normalise(title.text) not in ignored
        # A title the prompt itself names is the user's, not the model's invention.
        and normalise(title.text) not in asked
    ]


def score(suite: EvalSuite, answers: Mapping[str, str | None]) -> EvaluationResult:
    """A model's answers (by prompt id; a missing one fails its prompt) judged per prompt and per language.

    Raises :class:`EvaluationError` for an answer to a prompt the suite does not hold.

    Examples
    --------
    >>> from fleetops.promotion.eval_suite import load_eval_suite
    >>> result = score(load_eval_suite(), {"ja-03": "『鬼滅の刃』です。"})
    >>> result.passed, result.languages["ja"].passed_prompts
    (False, 1)
    """
    unknown = sorted(set(answers) - {p.id for p in suite.prompts})
    if unknown:
        raise EvaluationError(f"answers to prompts suite {suite.version} does not hold: {unknown}")
    results = [score_prompt(suite, prompt, answers.get(prompt.id)) for prompt in suite.prompts]
    languages = {language: _judge_language(suite, language, results) for language in suite.thresholds}
    failed = [f"{lang} failed: {_language_reason(s, results)}" for lang, s in languages.items() if not s.passed]
    held = [f"{lang} passed: {_summary(s)}" for lang, s in languages.items() if s.passed]
    return EvaluationResult(
        suite_version=suite.version,
        passed=not failed,
        reason="; ".join(failed + held),
        languages=languages,
        prompts=results,
    )


def _judge_language(suite: EvalSuite, language: Language, results: list[PromptResult]) -> LanguageScore:
    limits = suite.thresholds[language]
    own = [r for r in results if r.language == language]
    passed = sum(r.passed for r in own)
    rate = passed / len(own)
    invented = sum(len(r.hallucinated) for r in own)
    problems = []
    if rate < limits.min_pass_rate - _EPSILON:
        problems.append(f"pass rate {rate:.0%} ({passed}/{len(own)}) below {limits.min_pass_rate:.0%}")
    if invented > limits.max_hallucinated_total:
        problems.append(f"{invented} hallucinated titles above {limits.max_hallucinated_total}")
    return LanguageScore(
        language=language,
        prompts=len(own),
        passed_prompts=passed,
        pass_rate=rate,
        hallucinated=invented,
        passed=not problems,
        problems=problems,
    )


def _summary(language: LanguageScore) -> str:
    return (
        f"{language.pass_rate:.0%} ({language.passed_prompts}/{language.prompts}), {language.hallucinated} hallucinated"
    )


def _language_reason(language: LanguageScore, results: list[PromptResult]) -> str:
    """The broken limits, then every prompt of the language that failed or invented a title."""
    notable = [r.reason() for r in results if r.language == language.language and (not r.passed or r.hallucinated)]
    return ", ".join(language.problems) + (f" ({' | '.join(notable)})" if notable else "")


def compare(suite: EvalSuite, candidate: EvaluationResult, primary: EvaluationResult) -> Comparison:
    """The candidate against the primary on the same prompts: per language, at most the suite's drop in pass rate.

    Examples
    --------
    >>> from fleetops.promotion.eval_suite import load_eval_suite
    >>> suite = load_eval_suite()
    >>> both = compare(suite, score(suite, {}), score(suite, {}))
    >>> both.passed, both.languages["en"].regressions
    (True, [])
    """
    for result, name in ((candidate, "candidate"), (primary, "primary")):
        ids = [r.id for r in result.prompts]
        if result.suite_version != suite.version or ids != [p.id for p in suite.prompts]:
            raise EvaluationError(f"the {name}'s result is not of suite {suite.version} (it is {result.suite_version})")
    primary_passed = {r.id for r in primary.prompts if r.passed}
    languages = {}
    for language, limits in suite.thresholds.items():
        ours, theirs = candidate.languages[language].pass_rate, primary.languages[language].pass_rate
        languages[language] = LanguageComparison(
            language=language,
            candidate_pass_rate=ours,
            primary_pass_rate=theirs,
            max_drop=limits.max_drop_from_primary,
            passed=theirs - ours <= limits.max_drop_from_primary + _EPSILON,
            regressions=[
                r.id for r in candidate.prompts if r.language == language and not r.passed and r.id in primary_passed
            ],
        )
    return Comparison(
        passed=all(c.passed for c in languages.values()), reason=_comparison_reason(languages), languages=languages
    )


def _comparison_reason(languages: dict[Language, LanguageComparison]) -> str:
    parts = []
    for lang, c in languages.items():
        rates = f"{c.candidate_pass_rate:.0%} against the primary's {c.primary_pass_rate:.0%}"
        if c.passed:
            parts.append(f"{lang} within the primary: {rates}")
        else:
            drop = c.primary_pass_rate - c.candidate_pass_rate
            regressed = f"; regressed {', '.join(c.regressions)}" if c.regressions else ""
            parts.append(f"{lang} below the primary: {rates}, a drop of {drop:.0%} above {c.max_drop:.0%}{regressed}")
    return "; ".join(sorted(parts, key=lambda part: " within " in part))


def judge(
    suite: EvalSuite, candidate_answers: Mapping[str, str | None], primary_answers: Mapping[str, str | None] | None
) -> Verdict:
    """The gate: the candidate meets every language's thresholds and, where there is a primary, keeps up with it.

    ``primary_answers`` is ``None`` for an endpoint's first model, which has nothing to be compared with.

    Examples
    --------
    >>> from fleetops.promotion.eval_suite import load_eval_suite
    >>> verdict = judge(load_eval_suite(), {}, None)
    >>> verdict.passed, verdict.reason.startswith("candidate: en failed: pass rate 0% (0/6) below 80% (en-01: no")
    (False, True)
    """
    candidate = score(suite, candidate_answers)
    primary = None if primary_answers is None else score(suite, primary_answers)
    comparison = None if primary is None else compare(suite, candidate, primary)
    reason = f"candidate: {candidate.reason}"
    if comparison is not None:
        reason += f". Compared with the primary: {comparison.reason}"
    return Verdict(
        passed=candidate.passed and (comparison is None or comparison.passed),
        reason=reason,
        candidate=candidate,
        primary=primary,
        comparison=comparison,
    )
