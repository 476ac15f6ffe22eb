"""A small evaluation suite written out per test, so each test states the limits it judges against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from fleetops.promotion.eval_suite import EvalSuite, load_eval_suite

LIMITS = {
    "min_pass_rate": 0.5,
    "max_hallucinated_per_answer": 0,
    "max_hallucinated_total": 1,
    "max_drop_from_primary": 0.0,
}


def suite_data() -> dict[str, Any]:
    """One set, two prompts per language; every test changes only what it is about."""
    return {
        "version": "test-1",
        "thresholds": {"knowledge": dict(LIMITS)},
        "catalogue": {
            "demon-slayer": {"en": ["Demon Slayer", "Kimetsu no Yaiba"], "ja": ["鬼滅の刃"]},
            "one-piece": {"en": ["One Piece"], "ja": ["ワンピース"]},
            "frieren": {"en": ["Frieren"], "ja": ["葬送のフリーレン"]},
            "jujutsu-kaisen": {"en": ["Jujutsu Kaisen"], "ja": ["呪術廻戦"]},
        },
        "not_titles": ["予約", "Note"],
        "prompts": [
            {"id": "en-01", "set": "knowledge", "language": "en", "question": "Recommend a manga like Demon Slayer.",
             "titles_any": ["jujutsu-kaisen", "one-piece"]},
            {"id": "en-02", "set": "knowledge", "language": "en", "question": "Who wrote One Piece?",
             "terms_all": ["Oda"]},
            {"id": "ja-01", "set": "knowledge", "language": "ja", "question": "『葬送のフリーレン』の作者は誰ですか?",
             "terms_all": ["山田鐘人"]},
            {"id": "ja-03", "set": "knowledge", "language": "ja", "adapter": "jp_style",
             "messages": [{"role": "system", "content": "You help."},
                          {"role": "user", "content": "炭治郎が主人公の漫画は?"}],
             "titles_all": ["demon-slayer"]},
        ],
    }  # fmt: skip


GOOD = {
    "en-01": "Try **Jujutsu Kaisen**: dark, fast and funny.",
    "en-02": "One Piece is written by Eiichiro Oda.",
    "ja-01": "『葬送のフリーレン』の原作は山田鐘人さんです。",
    "ja-03": "『鬼滅の刃』です。第23巻で完結しました。",
}


def write_suite(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "eval_suite.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def make_suite(tmp_path: Path, **limits: Any) -> EvalSuite:
    """The small suite with its set's ``thresholds`` changed, e.g. ``make_suite(tmp, min_pass_rate=1)``."""
    data = suite_data()
    data["thresholds"]["knowledge"].update(limits)
    return load_eval_suite(write_suite(tmp_path, data))
