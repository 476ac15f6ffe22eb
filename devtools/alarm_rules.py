"""Composite alarm rules (``AlarmRule``) as CloudWatch documents them, for the emulated alarm evaluation.

A rule combines ``ALARM(x)``, ``OK(x)`` and ``INSUFFICIENT_DATA(x)`` (``x`` an alarm name or ARN, quoted or not),
``TRUE`` and ``FALSE`` with ``AND``, ``OR``, ``NOT`` and parentheses (``NOT`` binds tightest, then ``AND``, then
``OR``). Anything else is refused with :class:`AlarmRuleError` naming what. ``AT_LEAST`` is not emulated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_TOKEN = re.compile(
    r'\s*(?:(?P<state>ALARM|OK|INSUFFICIENT_DATA)\s*\(\s*(?:"(?P<quoted>[^"]+)"|(?P<bare>[^\s()"]+))\s*\)'
    r"|(?P<word>AND|OR|NOT|TRUE|FALSE)(?![A-Za-z_(])|(?P<paren>[()]))"
)


class AlarmRuleError(ValueError):
    """A rule the emulator cannot evaluate (a syntax error or an unsupported function)."""


@dataclass(frozen=True)
class _Token:
    kind: str  # state, word or paren
    text: str
    alarm: str = ""


def _alarm_name(ref: str) -> str:
    """``arn:aws:cloudwatch:<region>:<account>:alarm:<name>`` or a name -> the name."""
    return ref.split(":alarm:", 1)[1] if ref.startswith("arn:") and ":alarm:" in ref else ref


def _tokens(rule: str) -> list[_Token]:
    found, at = [], 0
    while at < len(rule.rstrip()):
        match = _TOKEN.match(rule, at)
        if match is None:
            raise AlarmRuleError(
                f"alarm rule {rule!r}: cannot read {rule[at:].strip()[:40]!r} (AT_LEAST is not emulated)"
            )
        if match["state"]:
            found.append(_Token("state", match["state"], _alarm_name(match["quoted"] or match["bare"])))
        else:
            found.append(_Token("word" if match["word"] else "paren", match["word"] or match["paren"]))
        at = match.end()
    return found


class _Parser:
    def __init__(self, rule: str, states: Mapping[str, str] | None) -> None:
        self.rule, self.states = rule, states
        self.tokens, self.at = _tokens(rule), 0
        self.alarms: list[str] = []

    def peek(self) -> str | None:
        return self.tokens[self.at].text if self.at < len(self.tokens) else None

    def take(self) -> _Token:
        if self.at >= len(self.tokens):
            raise AlarmRuleError(f"alarm rule {self.rule!r} ends too early")
        self.at += 1
        return self.tokens[self.at - 1]

    def either(self) -> bool:
        value = self.both()
        while self.peek() == "OR":
            self.take()
            value = self.both() or value  # both sides parsed: every named alarm is collected
        return value

    def both(self) -> bool:
        value = self.single()
        while self.peek() == "AND":
            self.take()
            value = self.single() and value
        return value

    def single(self) -> bool:
        token = self.take()
        if token.text == "NOT":
            return not self.single()
        if token.text == "(":
            value = self.either()
            if self.take().text != ")":
                raise AlarmRuleError(f"alarm rule {self.rule!r}: a parenthesis is not closed")
            return value
        if token.text in ("TRUE", "FALSE"):
            return token.text == "TRUE"
        if token.kind != "state":
            raise AlarmRuleError(f"alarm rule {self.rule!r}: unexpected {token.text!r}")
        self.alarms.append(token.alarm)
        if self.states is None:
            return False
        if token.alarm not in self.states:
            raise AlarmRuleError(f"alarm rule {self.rule!r} names alarm {token.alarm!r}, which does not exist")
        return self.states[token.alarm] == token.text

    def parse(self) -> bool:
        value = self.either()
        if self.at != len(self.tokens):
            raise AlarmRuleError(f"alarm rule {self.rule!r}: unexpected {self.tokens[self.at].text!r}")
        return value


def rule_alarms(rule: str) -> list[str]:
    """The alarm names a rule reads, in order.

    Examples
    --------
    >>> rule_alarms('ALARM("a-1h") AND ALARM(arn:aws:cloudwatch:us-east-1:123456789012:alarm:a-5m)')
    ['a-1h', 'a-5m']
    """
    parser = _Parser(rule, None)
    parser.parse()
    return parser.alarms


def evaluate_rule(rule: str, states: Mapping[str, str]) -> bool:
    """Whether ``rule`` is TRUE for the alarms' ``states`` (name -> ``ALARM``, ``OK`` or ``INSUFFICIENT_DATA``).

    Raises
    ------
    AlarmRuleError
        For a rule that does not parse, or names an alarm missing from ``states``.

    Examples
    --------
    >>> states = {"long": "ALARM", "short": "OK"}
    >>> evaluate_rule('ALARM("long") AND ALARM("short")', states)
    False
    >>> evaluate_rule("ALARM(long) AND NOT ALARM(short)", states)
    True
    >>> evaluate_rule("OK(short) OR FALSE AND TRUE", states)
    True
    """
    return _Parser(rule, states).parse()
