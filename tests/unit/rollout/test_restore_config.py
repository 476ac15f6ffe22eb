"""The name of the config a rollback restores, and which configs count as its target."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from fleetops.rollout.restore_config import MAX_NAME_LEN, restore_config_name, restores

AT = datetime(2026, 11, 27, 6, 30, 5, tzinfo=UTC)


def test_the_copy_is_named_after_the_config_it_restores_and_when_in_utc() -> None:
    tokyo = AT.astimezone(timezone(timedelta(hours=9)))
    name = restore_config_name("manga-chat", "manga-chat-v6-config", tokyo)
    assert name == "manga-chat-v6-config-restore-261127063005"


def test_a_copy_of_a_copy_keeps_one_mark_and_counts_as_the_same_target() -> None:
    first = restore_config_name("manga-chat", "manga-chat-v6-config", AT)
    second = restore_config_name("manga-chat", first, AT + timedelta(days=1))
    assert second == "manga-chat-v6-config-restore-261128063005"
    assert restores("manga-chat", second, first) and restores("manga-chat", first, "manga-chat-v6-config")
    # The original is not taken for a copy of itself the other way round, nor is another release's copy.
    assert not restores("manga-chat", "manga-chat-v6-config", first)
    assert not restores("manga-chat", restore_config_name("manga-chat", "manga-chat-v5-config", AT), first)


def test_a_long_name_is_cut_with_a_digest_under_the_endpoints_name_within_sagemakers_limit() -> None:
    """The stack may create configs under its endpoint's name only; two long names never share a copy's stem."""
    one = "manga-chat-" + "a" * 45 + "-one"
    other = "manga-chat-" + "a" * 45 + "-two"
    names = [restore_config_name("manga-chat", target, AT) for target in (one, other)]
    assert all(len(name) <= MAX_NAME_LEN and name.startswith("manga-chat-") for name in names), names
    assert names[0] != names[1]
    assert restores("manga-chat", names[0], one) and not restores("manga-chat", names[0], other)
    foreign = restore_config_name("manga-chat", "v6-by-hand", AT)
    assert foreign == "manga-chat-v6-by-hand-restore-261127063005" and restores("manga-chat", foreign, "v6-by-hand")
