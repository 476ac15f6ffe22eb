"""The base-model half of the artifact gate: ``config.json``, the safetensors weights, and the tokenizer.

The weights are judged from their headers only (:mod:`fleetops.promotion.safetensors_header`): which
tensors, which shapes, whether the file is long enough for them. The module names found there are what
each adapter's ``target_modules`` must match (:mod:`fleetops.promotion.artifact_adapters`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetops.promotion.artifact_snapshot import WEIGHTS_SUFFIX, FileFacts, load_object, tensors
from fleetops.promotion.artifact_tokenizer import tokenizer_problems
from fleetops.promotion.safetensors_header import Tensor, module_names

CONFIG = "config.json"
#: A sharded model's map of tensor -> shard; every shard it names must be in the artifact.
INDEX_SUFFIX = ".safetensors.index.json"
_EMBEDDING = "embed_tokens.weight"


@dataclass(frozen=True)
class BaseModel:
    """What the adapters are checked against: the base's module paths (empty when its weights are unreadable)."""

    modules: frozenset[str]
    problems: tuple[str, ...]


def _config_problems(config: dict[str, Any]) -> tuple[list[str], int | None]:
    problems = []
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
        problems.append(f'{CONFIG}: no "architectures" list naming the model class (vLLM picks the model by it)')
    vocab = config.get("vocab_size")
    if vocab is not None and (not isinstance(vocab, int) or isinstance(vocab, bool) or vocab < 1):
        problems.append(f"{CONFIG}: vocab_size {vocab!r} is not a positive integer")
        vocab = None
    return problems, vocab


def _index_problems(files: dict[str, FileFacts]) -> list[str]:
    problems = []
    for path in sorted(p for p in files if p.endswith(INDEX_SUFFIX)):
        index, problem = load_object(path, files[path])
        weight_map = index.get("weight_map") if index else None
        if problem or not isinstance(weight_map, dict):
            problems.append(problem or f"{path}: no weight_map")
            continue
        folder = path.rpartition("/")[0]
        shards = sorted({f"{folder}/{s}" if folder else str(s) for s in weight_map.values()})
        problems += [f"{path}: names shard {shard}, which is missing" for shard in shards if shard not in files]
    return problems


def _weight_problems(files: dict[str, FileFacts], vocab_size: int | None) -> tuple[list[str], dict[str, Tensor]]:
    weights = sorted(p for p in files if p.endswith(WEIGHTS_SUFFIX))
    if not weights:
        return [f"no *{WEIGHTS_SUFFIX} weights (vLLM needs the base model's weights as safetensors)"], {}
    problems: list[str] = []
    found: dict[str, Tensor] = {}
    for path in weights:
        held, problem = tensors(path, files[path])
        problems += [problem] if problem else []
        found.update(held)
    embedding = next((t for name, t in found.items() if name.endswith(_EMBEDDING)), None)
    if embedding and vocab_size is not None and embedding.shape and embedding.shape[0] != vocab_size:
        problems.append(
            f"{CONFIG}: vocab_size {vocab_size} but the weights' {_EMBEDDING} has {embedding.shape[0]} rows"
        )
    return problems, found


def check_base(files: dict[str, FileFacts]) -> BaseModel:
    """Every problem with the base model's files (paths relative to the artifact) and its module paths.

    Examples
    --------
    >>> for problem in check_base({}).problems:
    ...     print(problem)
    config.json: missing
    no *.safetensors weights (vLLM needs the base model's weights as safetensors)
    tokenizer_config.json: missing
    tokenizer.json: missing (a tokenizer needs tokenizer.json or tokenizer.model)
    """
    config, problem = load_object(CONFIG, files.get(CONFIG))
    problems = [problem] if problem else []
    vocab_size: int | None = None
    if config is not None:
        config_problems, vocab_size = _config_problems(config)
        problems += config_problems
    weight_problems, found = _weight_problems(files, vocab_size)
    problems += weight_problems + _index_problems(files)
    problems += tokenizer_problems(files, vocab_size)
    return BaseModel(modules=module_names(found), problems=tuple(problems))
