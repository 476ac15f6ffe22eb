"""Token counting with the model's own tokenizer and chat template, without torch or transformers.

The gateway counts exactly what vLLM will see: it renders the model's chat template (Jinja, as
Hugging Face does) and tokenizes it with ``tokenizers`` from ``tokenizer.json``. Per-message counts are
cached, so a long conversation costs one tokenization per new message, not per request.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from gateway.lru import BoundedLRU

Message = dict[str, str]

#: Bytes of a cache key's digest. The cache keeps a digest of each message, never its text: a text key
#: would pin whatever clients send (a non-ASCII character costs Python 4 bytes), a digest costs the same
#: few dozen bytes for a one-word message and a 1 MiB one.
DIGEST_BYTES = 16


class MessageCountCache(BoundedLRU[bytes, int]):
    """Per-message token counts keyed by a digest of role and content (:meth:`key`).

    Its size is bounded by entries alone, since every entry costs the same (a ``DIGEST_BYTES`` key and a
    small int): :attr:`nbytes` is its own accounting of what the keys and values hold.

    Examples
    --------
    >>> cache = MessageCountCache(2)
    >>> cache.put(cache.key("user", "a"), 1); cache.put(cache.key("user", "b"), 2)
    >>> cache.get(cache.key("user", "a")), cache.get(cache.key("assistant", "a"))
    (1, None)
    >>> cache.put(cache.key("user", "c" * 1_000_000), 3)  # "b" was the least recently used
    >>> len(cache), cache.get(cache.key("user", "b")), cache.nbytes < 200
    (2, None, True)
    """

    @staticmethod
    def key(role: str, content: str) -> bytes:
        """The digest of one message; ``surrogatepass`` because JSON may carry lone surrogates."""
        digest = hashlib.blake2b(role.encode(), digest_size=DIGEST_BYTES)
        digest.update(b"\x00")  # roles never hold NUL, so role and content cannot run into each other
        digest.update(content.encode("utf-8", "surrogatepass"))
        return digest.digest()

    @property
    def nbytes(self) -> int:
        """What the keys and values hold (``sys.getsizeof``; the dict's own table comes on top)."""
        return sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in self.items())


class TokenizerError(ValueError):
    """The model directory has no usable tokenizer or chat template."""


def _raise(message: str) -> None:
    raise TokenizerError(message)


class TokenCounter:
    """Counts chat prompt tokens the way the engine will.

    Parameters
    ----------
    model_dir
        A Hugging Face model directory with ``tokenizer.json`` and a ``chat_template`` in
        ``tokenizer_config.json`` (or ``chat_template.jinja``).

    Examples
    --------
    A model folder needs only these two files; here a word-level tokenizer (one token per word) and a
    one-line template, written to a temporary folder:

    >>> import tempfile
    >>> from tokenizers import models, pre_tokenizers
    >>> words = Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    >>> words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    >>> template = "{% for m in messages %}{{ m.role }}: {{ m.content }} {% endfor %}"
    >>> with tempfile.TemporaryDirectory() as model_dir:
    ...     words.save(f"{model_dir}/tokenizer.json")
    ...     _ = Path(model_dir, "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    ...     counter = TokenCounter(model_dir)
    >>> counter.render([{"role": "user", "content": "hello there"}])
    'user: hello there '
    >>> counter.count([{"role": "user", "content": "hello there"}])
    3
    """

    def __init__(self, model_dir: str | Path, cache_size: int = 65536) -> None:
        model_dir = Path(model_dir)
        try:
            self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
            config: dict[str, Any] = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, Exception) as exc:
            raise TokenizerError(f"cannot load the tokenizer from {model_dir}: {exc}") from exc
        template = config.get("chat_template")
        jinja_file = model_dir / "chat_template.jinja"
        if template is None and jinja_file.exists():
            template = jinja_file.read_text(encoding="utf-8")
        if not isinstance(template, str):
            raise TokenizerError(f"{model_dir} has no chat template (tokenizer_config.json chat_template)")
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
        )
        env.globals["raise_exception"] = _raise
        self._template = env.from_string(template)
        self._specials = {k: _token_text(config.get(k)) for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
        self.cache = MessageCountCache(cache_size)
        self._empty = self.count_exact([], add_generation_prompt=False)
        self._generation_prompt = self.count_exact([], add_generation_prompt=True) - self._empty
        probe = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "a"},
        ]
        #: Whether per-message counts add up to the exact count (true for templates without cross-message logic).
        self.additive = self.count(probe, add_generation_prompt=True) == self.count_exact(probe, True)

    def render(self, messages: list[Message], add_generation_prompt: bool = True) -> str:
        """Render messages with the chat template, exactly as vLLM does for chat completions."""
        return str(
            self._template.render(messages=messages, add_generation_prompt=add_generation_prompt, **self._specials)
        )

    def count_text(self, text: str) -> int:
        """Tokens of plain text (no template).

        ``encode_batch_fast`` because it releases the GIL (``encode`` holds it for the whole text: a 6 MB
        message held it for seconds), and ``len()`` of the encoding because building its ``ids`` list holds
        the GIL again; so a long prompt counted in a worker thread leaves the event loop free.
        """
        return len(self._tokenizer.encode_batch_fast([text], add_special_tokens=False)[0])

    def count_exact(self, messages: list[Message], add_generation_prompt: bool = True) -> int:
        """Tokens of the fully rendered prompt (one tokenization of the whole text)."""
        return self.count_text(self.render(messages, add_generation_prompt))

    def message(self, role: str, content: str) -> int:
        """Tokens one message adds to a prompt (cached by a digest of the message)."""
        key = self.cache.key(role, content)
        tokens = self.cache.get(key)
        if tokens is None:
            tokens = self._count_one(role, content)
            self.cache.put(key, tokens)
        return tokens

    def count(self, messages: list[Message], add_generation_prompt: bool = True) -> int:
        """Tokens of a prompt: cached per-message sums when the template allows, else exact."""
        if not getattr(self, "additive", True):
            return self.count_exact(messages, add_generation_prompt)
        total = self._empty + (self._generation_prompt if add_generation_prompt else 0)
        return total + sum(self.message(m["role"], m["content"]) for m in messages)

    def _count_one(self, role: str, content: str) -> int:
        return self.count_exact([{"role": role, "content": content}], add_generation_prompt=False) - self._empty


def _token_text(value: Any) -> str:
    # tokenizer_config.json spells special tokens as a string or as {"content": ...}.
    if isinstance(value, dict):
        return str(value.get("content", ""))
    return "" if value is None else str(value)
