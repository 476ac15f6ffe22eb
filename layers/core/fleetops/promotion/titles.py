"""How the offline evaluation finds titles in an answer and compares them with the catalogue.

The heuristic, and what it cannot see:

- **A title is what the answer marks as one.** Japanese 『』 and 「」 quotes, and in English text in double
  quotes (``"..."``, ``“...”``), ``**bold**`` or ``*italics*`` whose words are Title-Cased ("Blade of
  Ember", "Kimetsu no Yaiba": short words such as *of*, *the*, *no* may stay lower case). The house style
  marks titles, and an invented title is almost always written like a real one, so this catches the failure
  seen in the field (a quantized model answering with invented 『』 titles). An *unmarked* invented title is
  not seen; a required title, by contrast, is found marked or not (:func:`mentions`).
- **Not every marked phrase is a title.** 「」 also quotes speech and words (「予約」), bold also marks
  labels: a 「」 quote holding a sentence (。 or a full-width ! or ?) is skipped, so is a label ending in a
  colon ("**Price:**"); the rest go in the suite's ``not_titles`` list. A real title missing from the
  catalogue counts as invented until it is added: "hallucinated" means "not in the catalogue". A title the
  prompt itself names is the user's, not the model's invention.
- **Comparison is by normalised name** (:func:`normalise`): NFKC, case-folded, a leading "the" dropped,
  only letters and digits kept, so "ONE PIECE", "One Piece" and "one-piece" are one name, as are
  full-width and ASCII letters. A trailing volume ("Vol. 3", "第3巻") or a subtitle after a colon, dash or
  wave dash is also tried without it, so "One Piece Vol. 107" is One Piece; an invented spin-off ("Demon
  Slayer Academy") is not, unless the catalogue lists it.
- **A required title or term is found as a whole word** (:func:`mentions`): any run of spaces or
  punctuation matches any other ("Demon-Slayer"), and a Latin word must not run on ("Oda" is not in
  "today"). Japanese has no word breaks, so a Japanese term matches inside a longer word.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# Quote pairs that may hold a title. The English ones must also read as Title Case (below).
_JAPANESE = re.compile(r"『([^『』\n]{1,60})』|「([^「」\n]{1,60})」")
_ENGLISH = re.compile(r"\*\*([^*\n]{1,80})\*\*|(?<!\*)\*([^*\n]{1,80})\*(?!\*)|\"([^\"\n]{1,80})\"|“([^”\n]{1,80})”")
# A 「」 quote holding sentence punctuation (。 and the full-width ! and ?) quotes speech, not a title.
_SENTENCE_END = re.compile("[\u3002\uff01\uff1f]")
# Words a title may keep in lower case: English articles and prepositions, romanised Japanese particles.
_SMALL_WORDS = frozenset(
    [
        *("a", "an", "and", "as", "at", "by", "for", "from", "in", "into", "of", "on", "or", "the", "to", "with", "vs"),
        *("x", "no", "na", "ni", "wa", "ga", "wo", "o", "de", "mo", "e"),
    ]
)
_MAX_TITLE_WORDS = 10
_VOLUME = re.compile(r"\s*(?:,?\s*(?:vol(?:ume)?\.?|#|no\.)\s*\d+|第?\s*\d+\s*巻)\s*$", re.IGNORECASE)
# A colon (ASCII or full-width), a wave dash, or a spaced hyphen, en or em dash starts a subtitle.
_SUBTITLE = re.compile("\\s*(?:[:\uff1a\u301c~]|\\s[-\u2013\u2014]\\s).*$")
_NOT_ALPHANUMERIC = re.compile(r"[\W_]+")


@dataclass(frozen=True)
class MarkedTitle:
    """A phrase the answer marks as a title: as written (with its marks) and its text."""

    marked: str
    text: str


def normalise(name: str) -> str:
    """The form names are compared in: NFKC, case-folded, no leading "the", letters and digits only.

    Examples
    --------
    >>> normalise("The Apothecary Diaries"), normalise("ONE PIECE"), normalise("One-Piece!")
    ('apothecarydiaries', 'onepiece', 'onepiece')
    >>> normalise("ヴィンランド・サガ"), normalise("【推しの子】")
    ('ヴィンランドサガ', '推しの子')
    """
    return _NOT_ALPHANUMERIC.sub("", _folded(name))


def name_forms(text: str) -> set[str]:
    """The normalised forms a marked title is looked up under: as written, and without a volume or subtitle.

    Examples
    --------
    >>> sorted(name_forms("One Piece Vol. 107"))
    ['onepiece', 'onepiecevol107']
    >>> sorted(name_forms("鬼滅の刃 第23巻"))
    ['鬼滅の刃', '鬼滅の刃第23巻']
    >>> sorted(name_forms("Frieren: Beyond Journey's End"))
    ['frieren', 'frierenbeyondjourneysend']
    """
    forms = {normalise(text)}
    without_volume = _VOLUME.sub("", text)
    forms.add(normalise(without_volume))
    forms.add(normalise(_SUBTITLE.sub("", without_volume)))
    return {form for form in forms if form}


def marked_titles(answer: str) -> list[MarkedTitle]:
    """The phrases ``answer`` marks as titles, each once, in order of appearance.

    Examples
    --------
    >>> [t.marked for t in marked_titles('『鬼滅の刃』と「炎の剣士」がおすすめです。「本当に面白い。」と評判です。')]
    ['『鬼滅の刃』', '「炎の剣士」']
    >>> [t.text for t in marked_titles('Try **Blade of Ember** or "Jujutsu Kaisen". **Price:** 500 yen, *so* good')]
    ['Blade of Ember', 'Jujutsu Kaisen']
    """
    found: dict[str, MarkedTitle] = {}
    for match in _JAPANESE.finditer(answer):
        text = (match.group(1) or match.group(2)).strip()
        if text and not _SENTENCE_END.search(text):
            found.setdefault(normalise(text), MarkedTitle(match.group(0), text))
    for match in _ENGLISH.finditer(answer):
        text = next(group for group in match.groups() if group is not None).strip()
        if _title_cased(text):
            found.setdefault(normalise(text), MarkedTitle(match.group(0), text))
    return [title for key, title in found.items() if key]


def _title_cased(text: str) -> bool:
    """Whether English text reads as a title: not a label or a sentence, every long word capitalised."""
    words = text.split()
    if not words or len(words) > _MAX_TITLE_WORDS or text.endswith((":", "\uff1a", ".", ",")):
        return False
    if not (words[0][0].isupper() or words[0][0].isdigit()):
        return False
    return all(not word[0].isalpha() or word[0].isupper() or word.casefold() in _SMALL_WORDS for word in words[1:])


def mentions(answer: str, names: list[str]) -> bool:
    """Whether ``answer`` says any of ``names`` (a title's names, or a term), marked or not.

    Compared NFKC-normalised and case-folded, any run of spaces or punctuation matching any other, and a
    name that starts or ends with a Latin letter or digit only as a whole word ("Oda" is not in "today").

    Examples
    --------
    >>> mentions("Have you read DEMON-SLAYER yet?", ["Demon Slayer", "鬼滅の刃"])
    True
    >>> mentions("鬼滅の刃は面白い", ["Demon Slayer", "鬼滅の刃"]), mentions("Try Naruto", ["One Piece"])
    (True, False)
    >>> mentions("It ships today.", ["Oda"]), mentions("by Eiichiro Oda.", ["Oda"])
    (False, True)
    """
    text = unicodedata.normalize("NFKC", answer).casefold()
    return any(_pattern(name).search(text) for name in names)


def _pattern(name: str) -> re.Pattern[str]:
    chunks = [chunk for chunk in _NOT_ALPHANUMERIC.split(_folded(name)) if chunk]
    return re.compile(r"(?<![a-z0-9])" + r"[\W_]*".join(map(re.escape, chunks)) + r"(?![a-z0-9])")


def _folded(name: str) -> str:
    # "The Apothecary Diaries" and "Apothecary Diaries" are one title.
    return re.sub(r"^the\s+", "", unicodedata.normalize("NFKC", name).casefold().strip())
