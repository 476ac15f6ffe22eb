"""The evaluation suite is data: the shipped one loads and is passable, a malformed one is refused naming the entry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetops.promotion.eval_suite import EVAL_SUITE, EvalSuiteError, load_eval_suite
from fleetops.promotion.evaluation import Verdict, judge
from tests.unit.promotion.small_suite import suite_data, write_suite

# One good answer per shipped prompt: the shipped suite must be passable, or it would refuse every model.
REFERENCE = {
    "en-01": "If you like Demon Slayer, try **Jujutsu Kaisen** or **Chainsaw Man**.",
    "en-02": "In Japanese it is 『葬送のフリーレン』 (Sousou no Frieren).",
    "en-03": "One Piece is written and drawn by **Eiichiro Oda**.",  # a person in bold: in not_titles
    "en-04": "Try **Frieren: Beyond Journey's End** or **Made in Abyss**.",
    "en-05": "That is **Demon Slayer: Kimetsu no Yaiba**.",
    # Repeating the title the user asked about is not inventing it.
    "en-06": 'I\'m not familiar with a manga called "Blade of the Crimson Moon"; could you check the title?',
    "ja-01": "『呪術廻戦』や『チェンソーマン』がおすすめです。",
    "ja-02": "『葬送のフリーレン』の原作は山田鐘人、作画はアベツカサです。",
    "ja-03": "『鬼滅の刃』です。",
    "ja-04": "「尾田栄一郎」さんです。",
    "ja-05": "『葬送のフリーレン』や『メイドインアビス』はいかがでしょう。",
    "ja-06": "全34巻で完結しました。",
}


def test_the_shipped_suite_loads_with_both_languages_judged() -> None:
    suite = load_eval_suite()

    assert EVAL_SUITE.name == "eval_suite.yaml"
    assert {p.language for p in suite.prompts} == {"en", "ja"} == set(suite.thresholds)
    assert set(REFERENCE) == {p.id for p in suite.prompts}


def test_the_shipped_suite_passes_good_answers() -> None:
    verdict = judge(load_eval_suite(), REFERENCE, REFERENCE)

    assert verdict.passed, verdict.reason
    assert all(r.passed for r in verdict.candidate.prompts), verdict.reason


def test_the_shipped_suite_refuses_the_quantized_model_that_invented_titles() -> None:
    # The field's regression: a naive INT4 build answered Demon Slayer questions with invented titles.
    broken = REFERENCE | {
        "en-01": "If you like Demon Slayer, try **Blade of the Flame Pillar** and **Crimson Sword Hashira**.",
        "ja-01": "『炎の剣士』や『紅の刃』がおすすめです。",
        "ja-03": "『炎の剣士』です。",
    }

    verdict = judge(load_eval_suite(), broken, REFERENCE)

    assert not verdict.passed
    assert "ja-03: missing 鬼滅の刃; hallucinated 『炎の剣士』" in verdict.reason
    assert verdict.candidate.languages["ja"].hallucinated == 3
    assert verdict.comparison is not None
    assert verdict.comparison.languages["ja"].regressions == ["ja-01", "ja-03"]


def test_the_verdict_travels_as_json_unchanged() -> None:
    # The verdict is handed on as JSON (a workflow state's output): reading it back must give the same verdict.
    verdict = judge(load_eval_suite(), REFERENCE | {"ja-03": "『炎の剣士』です。"}, REFERENCE)

    again = Verdict.model_validate_json(verdict.model_dump_json())

    assert again == verdict
    assert again.candidate.prompts[8].hallucinated == ["『炎の剣士』"]


def test_a_prompt_gives_its_messages_or_its_question_as_the_user_message() -> None:
    suite = load_eval_suite()
    en_04 = next(p for p in suite.prompts if p.id == "en-04")

    assert [m["role"] for m in en_04.chat_messages()] == ["system", "user"]
    assert suite.prompts[0].chat_messages() == [
        {"role": "user", "content": "Recommend a shonen manga like Demon Slayer."}
    ]


def _prompt(data: dict[str, Any], prompt_id: str) -> dict[str, Any]:
    prompt: dict[str, Any] = next(p for p in data["prompts"] if p["id"] == prompt_id)
    return prompt


def _unknown_title(data: dict[str, Any]) -> None:
    _prompt(data, "ja-03")["titles_all"] = ["demon-slayr"]


def _both_question_and_messages(data: dict[str, Any]) -> None:
    _prompt(data, "ja-03")["question"] = "鬼滅の刃?"


def _misspelt_field(data: dict[str, Any]) -> None:
    _prompt(data, "en-02")["terms_al"] = ["Oda"]


def _duplicate_prompt_id(data: dict[str, Any]) -> None:
    _prompt(data, "en-02")["id"] = "en-01"


def _language_without_thresholds(data: dict[str, Any]) -> None:
    del data["thresholds"]["ja"]


def _pass_rate_above_one(data: dict[str, Any]) -> None:
    data["thresholds"]["ja"]["min_pass_rate"] = 1.5


def _name_under_two_titles(data: dict[str, Any]) -> None:
    data["catalogue"]["frieren"]["en"].append("ONE PIECE")


def _japanese_prompt_in_english(data: dict[str, Any]) -> None:
    _prompt(data, "ja-01")["question"] = "Who wrote Frieren?"


def _unknown_language(data: dict[str, Any]) -> None:
    _prompt(data, "en-02")["language"] = "fr"


def _title_without_names(data: dict[str, Any]) -> None:
    data["catalogue"]["frieren"] = {"en": [], "ja": []}


def _not_title_that_is_a_title(data: dict[str, Any]) -> None:
    data["not_titles"].append("one piece")


def _last_message_not_the_users(data: dict[str, Any]) -> None:
    _prompt(data, "ja-03")["messages"].append({"role": "assistant", "content": "はい"})


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (_unknown_title, "prompt ja-03: title 'demon-slayr' is not in the catalogue (did you mean demon-slayer?)"),
        (_both_question_and_messages, "prompts[ja-03]: Value error, prompt ja-03: give exactly one of question or"),
        (_misspelt_field, "prompts[en-02].terms_al: Extra inputs are not permitted"),
        (_duplicate_prompt_id, "prompt ids used more than once: ['en-01']"),
        (_language_without_thresholds, "prompts in ja but no thresholds for it"),
        (_pass_rate_above_one, "thresholds.ja.min_pass_rate: Input should be less than or equal to 1"),
        (_name_under_two_titles, "name 'onepiece' belongs to several titles: ['frieren', 'one-piece']"),
        (_japanese_prompt_in_english, "prompt ja-01 is tagged ja but holds no Japanese text"),
        (_unknown_language, "prompts[en-02].language: Input should be 'en' or 'ja'"),
        (_title_without_names, "catalogue.frieren: Value error, a title needs at least one name"),
        (_not_title_that_is_a_title, "not_titles entry 'one piece' is a catalogue name"),
        (_last_message_not_the_users, "prompt ja-03: the last message must be the user's"),
    ],
)
def test_a_malformed_suite_is_refused_naming_the_entry(
    tmp_path: Path, breakage: Callable[[dict[str, Any]], None], message: str
) -> None:
    data = suite_data()
    breakage(data)
    path = write_suite(tmp_path, data)

    with pytest.raises(EvalSuiteError, match="invalid evaluation suite") as refused:
        load_eval_suite(path)

    assert message in str(refused.value)
    assert str(path) in str(refused.value)


def test_a_key_given_twice_is_refused_rather_than_silently_dropped(tmp_path: Path) -> None:
    path = write_suite(tmp_path, suite_data())
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("catalogue:\n", "catalogue:\n  frieren:\n    en: [Frieren]\n", 1), encoding="utf-8")

    with pytest.raises(EvalSuiteError, match=r"keys given twice: \['frieren'\]"):
        load_eval_suite(path)


@pytest.mark.parametrize(
    ("text", "message"), [("- just\n- a list\n", "must be a mapping, got list"), ("a: [", "cannot read")]
)
def test_a_file_that_is_not_a_suite_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "eval_suite.yaml"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(EvalSuiteError, match=message):
        load_eval_suite(path)
