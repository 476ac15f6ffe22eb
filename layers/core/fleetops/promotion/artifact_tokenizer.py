"""The tokenizer half of the artifact gate: the files load, and every token id fits the model's vocabulary.

The check is **structural**: ``tokenizers`` (the library vLLM loads ``tokenizer.json`` with) is not in the
Lambda layer's requirements (``layers/core/requirements.txt``), so the gate parses the files as JSON and
checks the shape the library needs (a ``model`` with its ``type`` and ``vocab``, ``added_tokens`` with ids)
instead of loading them. A file that passes may still hold a normalizer or pre-tokenizer the library rejects;
the canary's start-up would then fail, before any user.
"""

from __future__ import annotations

from typing import Any

from fleetops.promotion.artifact_snapshot import FileFacts, load_object

TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
#: A SentencePiece model, the other form a tokenizer may take; protobuf, never unpickled, so it is allowed.
SENTENCEPIECE = "tokenizer.model"
_SPECIAL = ("bos_token", "eos_token", "unk_token", "pad_token")


def _token_ids(path: str, tokenizer: dict[str, Any]) -> tuple[dict[str, int], list[str]]:
    """Token text -> id from ``model.vocab`` and ``added_tokens``, or the problems with their structure."""
    model = tokenizer.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("type"), str):
        return {}, [f"{path}: no model with a type (not a tokenizers file)"]
    vocab = model.get("vocab")
    ids: dict[str, int] = {}
    if isinstance(vocab, dict) and all(isinstance(i, int) for i in vocab.values()):  # BPE, WordPiece, WordLevel
        ids.update(vocab)
    elif isinstance(vocab, list) and all(isinstance(e, list) and e and isinstance(e[0], str) for e in vocab):
        ids.update((entry[0], index) for index, entry in enumerate(vocab))  # Unigram: [piece, score] by id
    else:
        return {}, [f"{path}: model.vocab is neither a token -> id map nor a list of pieces"]
    added = tokenizer.get("added_tokens", [])
    if not isinstance(added, list) or not all(
        isinstance(t, dict) and isinstance(t.get("id"), int) and isinstance(t.get("content"), str) for t in added
    ):
        return ids, [f"{path}: added_tokens is not a list of {{id, content}}"]
    ids.update((t["content"], t["id"]) for t in added)
    return ids, []


def _special_problems(config: dict[str, Any], ids: dict[str, int]) -> list[str]:
    problems = []
    for key in _SPECIAL:
        token = config.get(key)
        text = token.get("content") if isinstance(token, dict) else token
        if isinstance(text, str) and ids and text not in ids:
            problems.append(f"{TOKENIZER_CONFIG}: {key} {text!r} is not a token of {TOKENIZER_JSON}")
    template = config.get("chat_template")
    if template is not None and not isinstance(template, (str, list)):
        problems.append(f"{TOKENIZER_CONFIG}: chat_template is neither a string nor a list of named templates")
    return problems


def tokenizer_problems(files: dict[str, FileFacts], vocab_size: int | None) -> list[str]:
    """Every problem with the base model's tokenizer files, each naming its file.

    ``vocab_size`` is ``config.json``'s: a token id at or above it passes vLLM's own prompt check (which
    asks the tokenizer) and then kills the engine on the first prompt that uses it.

    Examples
    --------
    >>> import json
    >>> def facts(doc): return FileFacts(size=1, sha256="", content=json.dumps(doc).encode())
    >>> tok = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}, "added_tokens": [{"id": 2, "content": "</s>"}]}
    >>> files = {"tokenizer.json": facts(tok), "tokenizer_config.json": facts({"eos_token": "</s>"})}
    >>> tokenizer_problems(files, 3)
    []
    >>> tokenizer_problems(files, 2)
    ["tokenizer.json: token id 2 is not below config.json's vocab_size 2 (the engine dies on a prompt using it)"]
    """
    config, problem = load_object(TOKENIZER_CONFIG, files.get(TOKENIZER_CONFIG))
    problems = [problem] if problem else []
    if TOKENIZER_JSON not in files:
        if SENTENCEPIECE not in files:
            problems.append(f"{TOKENIZER_JSON}: missing (a tokenizer needs {TOKENIZER_JSON} or {SENTENCEPIECE})")
        elif files[SENTENCEPIECE].size == 0:
            problems.append(f"{SENTENCEPIECE}: empty")
        return problems
    tokenizer, problem = load_object(TOKENIZER_JSON, files[TOKENIZER_JSON])
    if tokenizer is None:
        return [*problems, problem or f"{TOKENIZER_JSON}: unreadable"]
    ids, structure = _token_ids(TOKENIZER_JSON, tokenizer)
    problems += structure
    if ids and vocab_size is not None and max(ids.values()) >= vocab_size:
        problems.append(
            f"{TOKENIZER_JSON}: token id {max(ids.values())} is not below config.json's vocab_size {vocab_size} "
            "(the engine dies on a prompt using it)"
        )
    if config is not None:
        problems += _special_problems(config, ids)
    return problems
