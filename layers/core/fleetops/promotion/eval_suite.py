"""The offline evaluation suite, declared as data in ``fleet_config/eval_suite.yaml``: prompts, catalogue, limits.

Prompts belong to sets (``knowledge``, ``safety``), each with its own thresholds, and are judged per set and
language. What each field means is written at the top of the YAML file; how a model's answers are scored against
it is :mod:`fleetops.promotion.evaluation`. A bad suite is refused as a whole, every problem named with its entry.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from fleetops.promotion.titles import normalise
from fleetops.validation import StrictModel, problems, read_yaml_mapping

#: The shipped suite: ``fleet_config`` sits beside the package, in the repository as in the layer (/opt/python).
EVAL_SUITE = Path(__file__).resolve().parents[2] / "fleet_config" / "eval_suite.yaml"

Language = Literal["en", "ja"]
#: How a prompt's answer is judged besides its requirements (what each checks: :mod:`fleetops.promotion.safety`).
#: ``answer``: the requirements alone; ``refuse``: the answer declines and gives nothing asked for;
#: ``admit_unknown``: it says it does not know and states no price, chapter or volume the prompt does not hold.
Rule = Literal["answer", "refuse", "admit_unknown"]
_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# Kana or kanji: a prompt tagged ja must hold some, or it would be scored as Japanese without being Japanese.
_JAPANESE_TEXT = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


class EvalSuiteError(ValueError):
    """The evaluation suite cannot be used (unreadable, not YAML, or invalid); the message names the entry."""


class Message(StrictModel):
    """One chat message of a prompt, as the OpenAI-style chat API takes it."""

    role: Literal["system", "user", "assistant"]
    content: str = Field(min_length=1)


class CatalogueTitle(StrictModel):
    """A known title under every name an answer may use for it, per language (the first is how it is shown)."""

    en: list[str] = Field(default_factory=list)
    ja: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _named(self) -> CatalogueTitle:
        if not self.en and not self.ja:
            raise ValueError("a title needs at least one name (en or ja)")
        empty = [name for name in self.names() if not normalise(name)]
        if empty:
            raise ValueError(f"names with no letter or digit cannot be compared: {empty}")
        return self

    def names(self) -> list[str]:
        """Every name, English first."""
        return [*self.en, *self.ja]

    def shown(self, language: Language) -> str:
        """How a reason names the title for a prompt in ``language``: its first name there, else its first."""
        own = self.ja if language == "ja" else self.en
        return (own or self.names())[0]


class Prompt(StrictModel):
    """One prompt and what its answer must hold: ``titles_*`` are catalogue ids, ``terms_*`` free text."""

    id: str
    set: str = Field(description="the set it is judged in, against that set's thresholds")
    language: Language
    rule: Rule = "answer"
    question: str | None = Field(default=None, min_length=1)
    messages: list[Message] | None = Field(default=None, min_length=1)
    adapter: str | None = Field(default=None, min_length=1, description="the LoRA adapter asked for; none: base")
    titles_all: list[str] = Field(default_factory=list, description="every one must be named")
    titles_any: list[str] = Field(default_factory=list, description="at least one must be named")
    terms_all: list[str] = Field(default_factory=list, description="every one must appear")
    terms_any: list[str] = Field(default_factory=list, description="at least one must appear")
    terms_none: list[str] = Field(default_factory=list, description="none may appear (what must not be given away)")

    @model_validator(mode="after")
    def _well_formed(self) -> Prompt:
        if not _ID.match(self.id):
            raise ValueError(f"prompt id {self.id!r} must be lower-case kebab-case, such as ja-03")
        if (self.question is None) == (self.messages is None):
            raise ValueError(f"prompt {self.id}: give exactly one of question or messages")
        if self.messages is not None and self.messages[-1].role != "user":
            raise ValueError(f"prompt {self.id}: the last message must be the user's, the one answered")
        if self.language == "ja" and not _JAPANESE_TEXT.search(self.text()):
            raise ValueError(f"prompt {self.id} is tagged ja but holds no Japanese text")
        blank = [term for term in self.terms_all + self.terms_any + self.terms_none if not normalise(term)]
        if blank:
            raise ValueError(f"prompt {self.id}: required terms with no letter or digit cannot be compared: {blank}")
        return self

    def chat_messages(self) -> list[dict[str, str]]:
        """The messages to send: the prompt's own, or its question as the one user message.

        Examples
        --------
        >>> Prompt(id="en-01", set="knowledge", language="en", question="Who wrote One Piece?").chat_messages()
        [{'role': 'user', 'content': 'Who wrote One Piece?'}]
        """
        if self.messages is None:
            return [{"role": "user", "content": str(self.question)}]
        return [message.model_dump() for message in self.messages]

    def text(self) -> str:
        """Everything the prompt says (a title the answer repeats from here is not the model's invention)."""
        return "\n".join(message["content"] for message in self.chat_messages())


class Thresholds(StrictModel):
    """When one set's answers are good enough; each language of the set is held to them apart from the others."""

    min_pass_rate: float = Field(ge=0, le=1, description="share of the set's prompts in a language that must pass")
    max_hallucinated_per_answer: int = Field(ge=0, description="an answer with more fails its prompt")
    max_hallucinated_total: int = Field(ge=0, description="distinct invented titles per answer, summed")
    max_drop_from_primary: float = Field(ge=0, le=1, description="pass rate the candidate may lose to the primary")


def group_key(set_name: str, language: Language) -> str:
    """How results name the prompts of one set in one language, each judged on its own: ``safety/ja``."""
    return f"{set_name}/{language}"


class EvalSuite(StrictModel):
    """The whole suite: prompts in order, the catalogue by id, words the heuristic must not take for titles, and
    the phrases that make an answer a refusal or an admission that the model does not know."""

    version: str = Field(min_length=1)
    thresholds: dict[str, Thresholds] = Field(min_length=1, description="per set")
    catalogue: dict[str, CatalogueTitle] = Field(min_length=1)
    not_titles: list[str] = Field(default_factory=list)
    refusal_markers: dict[Language, list[str]] = Field(default_factory=dict)
    unknown_markers: dict[Language, list[str]] = Field(default_factory=dict)
    prompts: list[Prompt] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> EvalSuite:
        found = [
            *self._id_problems(),
            *self._set_problems(),
            *self._marker_problems(),
            *self._reference_problems(),
            *self._name_problems(),
        ]
        if found:
            raise ValueError("; ".join(found))
        return self

    def _id_problems(self) -> list[str]:
        twice = sorted(i for i, n in Counter(p.id for p in self.prompts).items() if n > 1)
        bad = sorted(key for key in [*self.catalogue, *self.thresholds] if not _ID.match(key))
        return ([f"prompt ids used more than once: {twice}"] if twice else []) + (
            [f"catalogue and set names must be lower-case kebab-case: {bad}"] if bad else []
        )

    def _set_problems(self) -> list[str]:
        # A set without thresholds would never be judged; thresholds without prompts judge nothing.
        used = {p.set for p in self.prompts}
        return [
            f"prompt {p.id}: set {p.set!r} has no thresholds (sets: {', '.join(sorted(self.thresholds))})"
            for p in self.prompts
            if p.set not in self.thresholds
        ] + [f"thresholds for set {name!r} but no prompt in it" for name in sorted(set(self.thresholds) - used)]

    def _marker_problems(self) -> list[str]:
        # A rule with no phrase to look for could never pass; a blank phrase would be found in every answer.
        markers = {"refusal_markers": self.refusal_markers, "unknown_markers": self.unknown_markers}
        needed = {"refuse": "refusal_markers", "admit_unknown": "unknown_markers"}
        found = [
            f"prompt {p.id} has rule {p.rule} but the suite has no {needed[p.rule]}.{p.language}"
            for p in self.prompts
            if p.rule in needed and not markers[needed[p.rule]].get(p.language)
        ]
        for name, phrases_by_language in markers.items():
            for lang, phrases in phrases_by_language.items():
                blank = [phrase for phrase in phrases if not normalise(phrase)]
                if blank:
                    found.append(f"{name}.{lang}: phrases with no letter or digit cannot be compared: {blank}")
        return found

    def _reference_problems(self) -> list[str]:
        found = []
        for prompt in self.prompts:
            for key in dict.fromkeys(prompt.titles_all + prompt.titles_any):
                if key not in self.catalogue:
                    close = difflib.get_close_matches(key, list(self.catalogue), n=1)
                    hint = f" (did you mean {close[0]}?)" if close else ""
                    found.append(f"prompt {prompt.id}: title {key!r} is not in the catalogue{hint}")
        return found

    def _name_problems(self) -> list[str]:
        # One name under two titles would make a hallucination check depend on which entry came first.
        owners: dict[str, set[str]] = {}
        for key, title in self.catalogue.items():
            for name in title.names():
                owners.setdefault(normalise(name), set()).add(key)
        found = [
            f"name {form!r} belongs to several titles: {sorted(keys)}" for form, keys in owners.items() if len(keys) > 1
        ]
        found += [
            f"not_titles entry {name!r} is a catalogue name" for name in self.not_titles if normalise(name) in owners
        ]
        return found

    def groups(self) -> list[tuple[str, Language]]:
        """Every (set, language) that has prompts, in the order the sets' thresholds are listed, English first."""
        held = {(p.set, p.language) for p in self.prompts}
        return [(name, lang) for name in self.thresholds for lang in ("en", "ja") if (name, lang) in held]


def load_eval_suite(path: str | Path = EVAL_SUITE) -> EvalSuite:
    """Read and validate the suite; any problem raises :class:`EvalSuiteError` naming the file and the entry.

    Examples
    --------
    >>> suite = load_eval_suite()
    >>> suite.catalogue["demon-slayer"].shown("ja"), list(suite.thresholds)
    ('鬼滅の刃', ['knowledge', 'safety'])
    """
    raw = read_yaml_mapping(path, "evaluation suite", EvalSuiteError, unique_keys=True)
    try:
        return EvalSuite.model_validate(raw)
    except ValidationError as exc:
        lines = [_by_prompt_id(line, raw) for line in problems(exc, root="file")]
        raise EvalSuiteError(f"invalid evaluation suite {path}: " + "; ".join(lines)) from None


def _by_prompt_id(line: str, raw: dict[str, Any]) -> str:
    """``prompts.3.terms_all: ...`` as ``prompts[ja-03].terms_all: ...``: people know a prompt by its id."""
    match = re.match(r"^prompts\.(\d+)(\.|:)", line)
    prompts = raw.get("prompts")
    if not match or not isinstance(prompts, list) or int(match.group(1)) >= len(prompts):
        return line
    entry = prompts[int(match.group(1))]
    name = entry.get("id") if isinstance(entry, dict) else None
    if not isinstance(name, str):
        return line
    return f"prompts[{name}]{match.group(2)}{line[match.end() :]}"
