"""The title heuristic: what an answer marks as a title, and when two names are the same title."""

from __future__ import annotations

import pytest

from fleetops.promotion.titles import marked_titles, mentions, name_forms, normalise


@pytest.mark.parametrize(
    ("answer", "titles"),
    [
        ("『鬼滅の刃』と「呪術廻戦」がおすすめ。", ["鬼滅の刃", "呪術廻戦"]),
        ("店員は「在庫はあります。」と言いました。", []),  # a quoted sentence is speech
        ('Read **Blade of Ember** and *Kimetsu no Yaiba*.', ["Blade of Ember", "Kimetsu no Yaiba"]),
        ('"Attack on Titan" ended.', ["Attack on Titan"]),
        ("“Kaiju No. 8” is out.", ["Kaiju No. 8"]),
        ('**Price:** 500 yen. She said "this is great" and *really* meant it.', []),  # a label, a sentence
        ("Try **Naruto**, then **Naruto** again.", ["Naruto"]),  # each title once
        ("* One Piece\n* Naruto", []),  # list bullets are not italics
    ],
)  # fmt: skip
def test_marked_titles(answer: str, titles: list[str]) -> None:
    assert [t.text for t in marked_titles(answer)] == titles


def test_names_normalise_across_case_width_punctuation_and_a_leading_article() -> None:
    assert normalise("The Apothecary Diaries") == normalise("apothecary diaries")
    assert normalise("ＯＮＥ ＰＩＥＣＥ") == normalise("One-Piece") == "onepiece"  # noqa: RUF001 (full-width on purpose)
    assert normalise("ヴィンランド・サガ") == normalise("ヴィンランドサガ")
    assert normalise("Jujutsu Kaisen") != normalise("Jujutsu Kaisen 0")


@pytest.mark.parametrize(
    ("marked", "name"),
    [
        ("One Piece Vol. 107", "onepiece"),
        ("鬼滅の刃 第23巻", "鬼滅の刃"),
        ("Frieren: Beyond Journey's End", "frieren"),
        ("Demon Slayer - Mugen Train", "demonslayer"),
    ],
)
def test_a_volume_or_a_subtitle_is_also_tried_without_it(marked: str, name: str) -> None:
    assert name in name_forms(marked)


def test_an_invented_spin_off_is_not_its_parent_title() -> None:
    assert "demonslayer" not in name_forms("Demon Slayer Academy")


@pytest.mark.parametrize(
    ("answer", "names", "said"),
    [
        ("Have you read demon slayer?", ["Demon Slayer"], True),
        ("Spy×Family is fun", ["Spy Family"], True),  # noqa: RUF001 (the title's own sign)
        ("It ships today.", ["Oda"], False),
        ("Written by Eiichiro Oda.", ["Oda"], True),
        ("All 34 volumes", ["34"], True),
        ("All 134 volumes", ["34"], False),
        ("全34巻で完結", ["34"], True),
        ("原作は山田鐘人さん", ["山田鐘人"], True),
        ("I couldn’t find it", ["couldn't find"], True),  # noqa: RUF001 (a typographic apostrophe)
    ],
)
def test_mentions_match_whole_words(answer: str, names: list[str], said: bool) -> None:
    assert mentions(answer, names) is said
