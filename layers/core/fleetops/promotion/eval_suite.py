"""The offline evaluation suite, declared as data in ``fleet_config/eval_suite.yaml``: prompts, catalogue, limits.

What each field means is written at the top of the YAML file; how a model's answers are scored against it is
:mod:`fleetops.promotion.evaluation`. A bad suite is refused as a whole, every problem named with its entry.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from fleetops.promotion.titles import normalise
from fleetops.validation import StrictModel, problems

#: The shipped suite: ``fleet_config`` sits beside the package, in the repository as in the layer (/opt/python).
EVAL_SUITE = Path(__file__).resolve().parents[2] / "fleet_config" / "eval_suite.yaml"

Language = Literal["en", "ja"]
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
    language: Language
    question: str | None = Field(default=None, min_length=1)
    messages: list[Message] | None = Field(default=None, min_length=1)
    adapter: str | None = Field(default=None, min_length=1, description="the LoRA adapter asked for; none: base")
    titles_all: list[str] = Field(default_factory=list, description="every one must be named")
    titles_any: list[str] = Field(default_factory=list, description="at least one must be named")
    terms_all: list[str] = Field(default_factory=list, description="every one must appear")
    terms_any: list[str] = Field(default_factory=list, description="at least one must appear")

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
        blank = [term for term in self.terms_all + self.terms_any if not normalise(term)]
        if blank:
            raise ValueError(f"prompt {self.id}: required terms with no letter or digit cannot be compared: {blank}")
        return self

    def chat_messages(self) -> list[dict[str, str]]:
        """The messages to send: the prompt's own, or its question as the one user message.

        Examples
        --------
        >>> Prompt(id="en-01", language="en", question="Who wrote One Piece?").chat_messages()
        [{'role': 'user', 'content': 'Who wrote One Piece?'}]
        """
        if self.messages is None:
            return [{"role": "user", "content": str(self.question)}]
        return [message.model_dump() for message in self.messages]

    def text(self) -> str:
        """Everything the prompt says (a title the answer repeats from here is not the model's invention)."""
        return "\n".join(message["content"] for message in self.chat_messages())


class LanguageThresholds(StrictModel):
    """When the answers in one language are good enough, judged apart from every other language."""

    min_pass_rate: float = Field(ge=0, le=1, description="share of the language's prompts that must pass")
    max_hallucinated_per_answer: int = Field(ge=0, description="an answer with more fails its prompt")
    max_hallucinated_total: int = Field(ge=0, description="distinct invented titles per answer, summed")
    max_drop_from_primary: float = Field(ge=0, le=1, description="pass rate the candidate may lose to the primary")


class EvalSuite(StrictModel):
    """The whole suite: prompts in order, the catalogue by id, words the heuristic must not take for titles."""

    version: str = Field(min_length=1)
    thresholds: dict[Language, LanguageThresholds] = Field(min_length=1)
    catalogue: dict[str, CatalogueTitle] = Field(min_length=1)
    not_titles: list[str] = Field(default_factory=list)
    prompts: list[Prompt] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> EvalSuite:
        found = [*self._id_problems(), *self._language_problems(), *self._reference_problems(), *self._name_problems()]
        if found:
            raise ValueError("; ".join(found))
        return self

    def _id_problems(self) -> list[str]:
        twice = sorted(i for i, n in Counter(p.id for p in self.prompts).items() if n > 1)
        bad = sorted(key for key in self.catalogue if not _ID.match(key))
        return ([f"prompt ids used more than once: {twice}"] if twice else []) + (
            [f"catalogue ids must be lower-case kebab-case: {bad}"] if bad else []
        )

    def _language_problems(self) -> list[str]:
        # A language without thresholds would never be judged; thresholds without prompts judge nothing.
        used = {p.language for p in self.prompts}
        return [f"prompts in {lang} but no thresholds for it" for lang in sorted(used - set(self.thresholds))] + [
            f"thresholds for {lang} but no prompt in it" for lang in sorted(set(self.thresholds) - used)
        ]

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

    def prompt_ids(self, language: Language) -> list[str]:
        """The ids of the prompts in ``language``, in suite order."""
        return [p.id for p in self.prompts if p.language == language]


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses a key given twice: plain YAML keeps the last one and loses the other silently."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [self.construct_object(key_node, deep=deep) for key_node, _ in node.value]
        twice = sorted({str(k) for k, n in Counter(map(str, keys)).items() if n > 1})
        if twice:
            raise yaml.constructor.ConstructorError(None, None, f"keys given twice: {twice}", node.start_mark)
        return super().construct_mapping(node, deep=deep)


def load_eval_suite(path: str | Path = EVAL_SUITE) -> EvalSuite:
    """Read and validate the suite; any problem raises :class:`EvalSuiteError` naming the file and the entry.

    Examples
    --------
    >>> suite = load_eval_suite()
    >>> suite.catalogue["demon-slayer"].shown("ja"), sorted(suite.thresholds)
    ('鬼滅の刃', ['en', 'ja'])
    """
    try:
        raw = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # a SafeLoader
    except (OSError, yaml.YAMLError) as exc:
        raise EvalSuiteError(f"cannot read evaluation suite {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise EvalSuiteError(f"evaluation suite {path} must be a mapping, got {type(raw).__name__}")
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
