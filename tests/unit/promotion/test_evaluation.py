"""The offline evaluation's scorer on fixed answers: per prompt, per language, and against the primary."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetops.promotion.eval_suite import load_eval_suite
from fleetops.promotion.evaluation import EvaluationError, compare, judge, score
from tests.unit.promotion.small_suite import GOOD, make_suite


def test_good_answers_pass_every_prompt_and_language(tmp_path: Path) -> None:
    result = score(make_suite(tmp_path), GOOD)

    assert result.passed
    assert [r.passed for r in result.prompts] == [True, True, True, True]
    assert result.groups["knowledge/en"].pass_rate == 1.0
    assert result.groups["knowledge/ja"].hallucinated == 0
    assert (
        result.reason
        == "knowledge/en passed: 100% (2/2), 0 hallucinated; knowledge/ja passed: 100% (2/2), 0 hallucinated"
    )


def test_a_missing_title_fails_its_prompt_named_in_the_prompts_language(tmp_path: Path) -> None:
    result = score(make_suite(tmp_path, min_pass_rate=1.0), GOOD | {"ja-03": "その漫画は人気です。"})

    ja_03 = result.prompts[3]
    assert not ja_03.passed
    assert ja_03.missing == ["鬼滅の刃"]
    assert ja_03.reason() == "ja-03: missing 鬼滅の刃"
    assert not result.passed
    assert result.reason.startswith("knowledge/ja failed: pass rate 50% (1/2) below 100% (ja-03: missing 鬼滅の刃)")


def test_a_title_is_found_under_any_of_its_names_whatever_its_case_and_punctuation(tmp_path: Path) -> None:
    result = score(make_suite(tmp_path), GOOD | {"ja-03": "It is DEMON-SLAYER.", "en-01": "呪術廻戦 is great."})

    assert result.prompts[0].passed
    assert result.prompts[3].passed


def test_missing_terms_and_alternatives_are_named(tmp_path: Path) -> None:
    answers = GOOD | {"en-01": "Try Naruto.", "en-02": "It ships today."}  # "today" does not say "Oda"

    result = score(make_suite(tmp_path), answers)

    assert result.prompts[0].reason() == "en-01: missing one of Jujutsu Kaisen, One Piece"
    assert result.prompts[1].reason() == "en-02: missing Oda"


def test_an_invented_title_is_counted_and_named_as_the_answer_wrote_it(tmp_path: Path) -> None:
    result = score(make_suite(tmp_path), GOOD | {"ja-03": "『炎の剣士』という漫画です。"})

    assert result.prompts[3].hallucinated == ["『炎の剣士』"]
    assert result.prompts[3].reason() == "ja-03: missing 鬼滅の刃; hallucinated 『炎の剣士』"
    assert result.groups["knowledge/ja"].hallucinated == 1


def test_catalogue_titles_volumes_the_prompts_own_titles_and_known_phrases_are_not_invented(tmp_path: Path) -> None:
    answers = GOOD | {
        "en-01": 'Try **Jujutsu Kaisen Vol. 3**, "One Piece: Red" or **Demon Slayer**. **Note:** in stock.',
        "ja-01": "『葬送のフリーレン』第13巻、作者は山田鐘人。「予約」できます。「とても面白い。」と評判。",
    }

    result = score(make_suite(tmp_path), answers)

    assert [r.hallucinated for r in result.prompts] == [[], [], [], []]
    assert result.passed


def test_an_invented_english_title_in_bold_or_quotes_is_counted_once(tmp_path: Path) -> None:
    answer = 'Try **Blade of Ember** or "Blade of Ember", or **Demon Slayer Academy**. Jujutsu Kaisen too.'

    result = score(make_suite(tmp_path), GOOD | {"en-01": answer})

    assert result.prompts[0].hallucinated == ["**Blade of Ember**", "**Demon Slayer Academy**"]
    assert not result.prompts[0].passed


def test_an_answer_within_the_per_answer_limit_passes_but_counts_towards_the_total(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, max_hallucinated_per_answer=1, max_hallucinated_total=1)
    one = "『鬼滅の刃』と『炎の剣士』です。"

    within = score(suite, GOOD | {"ja-03": one})
    beyond = score(suite, GOOD | {"ja-03": one, "ja-01": "山田鐘人さんの『氷の魔女』です。"})

    assert within.prompts[3].passed
    assert within.passed
    assert beyond.groups["knowledge/ja"].hallucinated == 2
    assert not beyond.passed
    assert beyond.groups["knowledge/ja"].problems == ["2 hallucinated titles above 1"]
    assert "ja-01: hallucinated 『氷の魔女』 | ja-03: hallucinated 『炎の剣士』" in beyond.reason


def test_a_good_english_score_cannot_hide_a_bad_japanese_one(tmp_path: Path) -> None:
    # Three of four prompts pass: 75% over both languages would meet the limit, Japanese alone is at 50%.
    suite = make_suite(tmp_path, min_pass_rate=0.75)

    result = score(suite, GOOD | {"ja-03": "『炎の剣士』です。"})

    assert result.groups["knowledge/en"].passed
    assert not result.groups["knowledge/ja"].passed
    assert not result.passed
    assert result.reason.startswith("knowledge/ja failed: pass rate 50% (1/2) below 75%")
    assert result.reason.endswith("knowledge/en passed: 100% (2/2), 0 hallucinated")


def test_a_missing_or_empty_answer_fails_its_prompt(tmp_path: Path) -> None:
    answers = {k: v for k, v in GOOD.items() if k != "en-02"} | {"ja-01": "  "}

    result = score(make_suite(tmp_path), answers)

    assert [r.reason() for r in result.prompts if not r.passed] == ["en-02: no answer", "ja-01: no answer"]


def test_answers_to_prompts_the_suite_does_not_hold_are_refused(tmp_path: Path) -> None:
    with pytest.raises(EvaluationError, match=r"does not hold: \['ja-99'\]"):
        score(make_suite(tmp_path), GOOD | {"ja-99": "?"})


def test_a_candidate_as_good_as_the_primary_passes_the_comparison(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)

    comparison = compare(suite, score(suite, GOOD), score(suite, GOOD))

    assert comparison.passed
    assert comparison.reason == (
        "knowledge/en within the primary: 100% against the primary's 100%; "
        "knowledge/ja within the primary: 100% against the primary's 100%"
    )


def test_a_candidate_below_the_primary_by_more_than_the_margin_fails_naming_the_regressions(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, max_drop_from_primary=0.25)
    candidate = score(suite, GOOD | {"ja-03": "『炎の剣士』です。"})

    comparison = compare(suite, candidate, score(suite, GOOD))

    assert candidate.passed  # 50% meets min_pass_rate 0.5: only the primary shows what was lost
    assert not comparison.passed
    assert comparison.groups["knowledge/en"].passed
    assert comparison.groups["knowledge/ja"].regressions == ["ja-03"]
    assert comparison.reason.startswith(
        "knowledge/ja below the primary: 50% against the primary's 100%, a drop of 50% above 25%; regressed ja-03"
    )


def test_a_drop_within_the_margin_or_a_better_candidate_passes_the_comparison(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, max_drop_from_primary=0.5)
    worse = score(suite, GOOD | {"ja-03": "わかりません。"})
    best = score(suite, GOOD)

    assert compare(suite, worse, best).passed  # exactly the margin
    assert compare(suite, best, worse).passed


def test_results_of_another_suite_are_not_compared(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    shipped = load_eval_suite()

    with pytest.raises(EvaluationError, match="the primary's result is not of suite test-1"):
        compare(suite, score(suite, GOOD), score(shipped, {}))


def test_the_verdict_needs_the_thresholds_and_the_comparison(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    worse = GOOD | {"ja-03": "『炎の剣士』です。"}

    alone = judge(suite, worse, None)
    against_primary = judge(suite, worse, GOOD)
    equal = judge(suite, GOOD, GOOD)

    assert alone.passed
    assert alone.comparison is None
    assert not against_primary.passed
    assert "Compared with the primary: knowledge/ja below the primary" in against_primary.reason
    assert equal.passed
    assert equal.primary is not None
    assert equal.primary.passed
