"""Adapter routing and the start-up adapter compatibility check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetops.promotion.eval_suite import load_eval_suite
from gateway.config import GatewayConfig, RoutingConfig
from gateway.errors import GatewayError
from gateway.protocol import InvocationRequest
from gateway.routing import AdapterCompatibilityError, Router, check_adapters


def req(**fields: object) -> InvocationRequest:
    return InvocationRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], **fields})


@pytest.mark.parametrize(
    ("fields", "adapter"),
    [
        ({"locale": "ja-JP"}, "jp_style"),
        ({"locale": "ja"}, "jp_style"),
        ({"locale": "jam"}, "manga_domain"),
        ({"intent": "refund"}, "general_support"),
        ({"intent": "refund", "locale": "ja_JP"}, "general_support"),  # support before the Japanese style
        ({"intent": "recommendation", "locale": "ja_JP"}, "jp_style"),
        ({"intent": "recommendation"}, "manga_domain"),
        ({}, "manga_domain"),  # the default
        ({"adapter": "base"}, "base"),
        ({"model": "general_support", "locale": "ja-JP"}, "general_support"),  # explicit wins
    ],
)
def test_routes(config: GatewayConfig, fields: dict[str, object], adapter: str) -> None:
    assert Router(config.routing).resolve(req(**fields)) == adapter


# Real-looking questions, routed by gateway.yaml with no intent given: the words decide.
QUESTIONS = [
    # Japanese support questions keep the support adapter, whatever the locale says about style.
    ("ja-JP", "先週注文した『呪術廻戦』の最新刊がまだ届きません。", "general_support"),
    ("ja-JP", "注文番号12345の配送状況を教えてください。", "general_support"),
    ("ja", "届いた本の表紙が破れていたので返品したいです。", "general_support"),
    ("ja-JP", "返金はいつ口座に戻りますか?", "general_support"),
    ("ja-JP", "支払い方法をコンビニ払いに変えられますか?", "general_support"),
    ("ja-JP", "予約していた『ワンピース』110巻をキャンセルしたいです。", "general_support"),
    ("ja-JP", "アカウントのパスワードを忘れてしまいました。", "general_support"),
    ("ja-JP", "ログインできません。", "general_support"),
    ("ja-JP", "送料はいくらですか?", "general_support"),
    ("ja-JP", "領収書を発行してもらえますか?", "general_support"),
    # Japanese questions about manga stay on the Japanese style adapter.
    ("ja-JP", "『鬼滅の刃』に似た漫画のおすすめを教えてください。", "jp_style"),
    ("ja-JP", "『葬送のフリーレン』の最新刊はいつ発売ですか?", "jp_style"),
    ("ja", "『進撃の巨人』は何巻で完結しましたか?", "jp_style"),
    # English support questions go to support, manga questions to the default.
    ("en-US", "Where is my order? It was supposed to arrive on Monday.", "general_support"),
    ("en-GB", "My parcel never arrived, can you check the tracking?", "general_support"),
    ("en-US", "I'd like a refund for a damaged copy of Berserk volume 3.", "general_support"),
    ("en-US", "I was charged twice for the same preorder.", "general_support"),
    ("en-US", "How do I cancel my subscription?", "general_support"),
    ("en", "I can't log in to my account.", "general_support"),
    ("en-US", "Do you ship to Canada?", "general_support"),
    ("en-US", "Which manga is about a pirate ship?", "manga_domain"),  # "ship" alone is no shipping question
    ("en-US", "Recommend a manga like Demon Slayer.", "manga_domain"),
    ("en-US", "In what order should I read the Monogatari series?", "manga_domain"),  # reading order, not an order
    ("en-US", "When does Frieren return from hiatus?", "manga_domain"),
]


@pytest.mark.parametrize(("locale", "question", "adapter"), QUESTIONS)
def test_questions_route_by_their_words(config: GatewayConfig, locale: str, question: str, adapter: str) -> None:
    assert Router(config.routing).resolve(req(messages=[{"role": "user", "content": question}], locale=locale)) == (
        adapter
    )


def test_a_question_without_a_locale_is_matched_against_every_locales_keywords(config: GatewayConfig) -> None:
    router = Router(config.routing)

    assert router.resolve(req(messages=[{"role": "user", "content": "注文をキャンセルしたい"}])) == "general_support"
    assert router.intent_of(req(messages=[{"role": "user", "content": "注文をキャンセルしたい"}])) == "order_status"
    # With a locale, only that locale's words count: English words do not route a Japanese request.
    assert router.intent_of(req(messages=[{"role": "user", "content": "refund"}], locale="ja-JP")) is None


def test_an_intent_given_wins_over_the_words_and_only_the_last_user_message_counts(config: GatewayConfig) -> None:
    router = Router(config.routing)
    turns = [
        {"role": "user", "content": "注文した本が届きません。"},
        {"role": "assistant", "content": "確認します。"},
        {"role": "user", "content": "ところで、おすすめの漫画は?"},
    ]

    assert router.resolve(req(messages=turns, locale="ja-JP")) == "jp_style"
    assert router.resolve(req(messages=turns[:1], locale="ja-JP", intent="recommendation")) == "jp_style"


def test_every_suite_prompt_names_the_adapter_the_gateway_routes_it_to(config: GatewayConfig) -> None:
    # The candidate gate asks each prompt of its adapter; it must be the one users with that question get.
    router = Router(config.routing)
    suite = load_eval_suite()

    routed = {
        p.id: router.resolve(req(messages=p.chat_messages(), locale=p.language)) for p in suite.prompts if p.adapter
    }

    assert routed == {p.id: p.adapter for p in suite.prompts if p.adapter}
    assert {routed[p.id] for p in suite.prompts if p.adapter and p.language == "ja"} >= {"jp_style", "general_support"}


def test_keywords_of_an_intent_no_route_names_are_refused(config: GatewayConfig) -> None:
    data = config.routing.model_dump() | {"intent_keywords": {"ja": {"refnd": ["返金"], "refund": ["返品"]}}}

    with pytest.raises(ValueError, match=r"intent_keywords.ja.refnd: no route names that intent \(routed intents: "):
        RoutingConfig.model_validate(data)


def test_unknown_adapter_is_a_400_listing_the_valid_ones(config: GatewayConfig) -> None:
    with pytest.raises(GatewayError) as info:
        Router(config.routing).resolve(req(adapter="shonen_v9"))
    assert info.value.code.status == 400
    assert info.value.message == (
        "unknown adapter 'shonen_v9'; valid adapters: base, general_support, jp_style, manga_domain"
    )


def write_adapter(root: Path, name: str, rank: int, targets: list[str]) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "adapter_config.json").write_text(json.dumps({"r": rank, "target_modules": targets}))


def test_compatible_adapters_pass(tmp_path: Path) -> None:
    write_adapter(tmp_path, "a", 8, ["q_proj", "v_proj"])
    write_adapter(tmp_path, "b", 8, ["v_proj", "q_proj"])  # order does not matter
    assert {i.rank for i in check_adapters({"a": tmp_path / "a", "b": tmp_path / "b"}).values()} == {8}


def test_mismatched_adapters_fail_with_every_adapter_named(tmp_path: Path) -> None:
    write_adapter(tmp_path, "a", 8, ["q_proj", "v_proj"])
    write_adapter(tmp_path, "b", 16, ["q_proj", "v_proj"])
    with pytest.raises(AdapterCompatibilityError) as info:
        check_adapters({"a": tmp_path / "a", "b": tmp_path / "b"})
    assert "a: rank 8, target_modules ['q_proj', 'v_proj']; b: rank 16" in str(info.value)


def test_every_missing_adapter_is_named(tmp_path: Path) -> None:
    write_adapter(tmp_path, "a", 8, ["q_proj"])
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "adapter_config.json").write_text("{not json")

    with pytest.raises(AdapterCompatibilityError) as info:
        check_adapters({"ghost": tmp_path / "ghost", "a": tmp_path / "a", "broken": tmp_path / "broken"})

    assert info.value.problems[0] == (
        f"adapter 'ghost': cannot read {tmp_path}/ghost/adapter_config.json: No such file or directory"
    )
    assert info.value.problems[1].startswith("adapter 'broken': cannot read")
    assert len(info.value.problems) == 2
