"""The adapter half of the artifact gate: each LoRA adapter fits the engine and the base it is served on.

The gateway starts vLLM with ``--max-lora-rank`` set to the adapters' shared rank and refuses to start when
the adapters differ in rank or target modules (``gateway/routing.py``); these checks refuse the same artifact
earlier, before a canary instance is paid for, and add what the gateway cannot see: a target module the
base lacks, a rank above what the fleet was sized for, weights that disagree with their config.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fleetops.promotion.artifact_snapshot import FileFacts, load_object, tensors

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
#: The ranks vLLM accepts as ``--max-lora-rank`` (``vllm.config.lora.MaxLoRARanks``, vLLM 0.32); the gateway
#: passes the adapters' rank there, so any other rank stops the engine at start-up.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
#: The rank the fleet's GPU memory was sized for: vLLM reserves LoRA memory per slot in proportion to
#: ``--max-lora-rank``. There is no engine knob for it (``EngineKnobs`` has none), so the gate holds the bound.
DEFAULT_MAX_LORA_RANK = 64
#: peft's shorthand for "every linear layer"; resolved by peft against the model, so there is no name to check.
ALL_LINEAR = "all-linear"


@dataclass(frozen=True)
class AdapterShape:
    """What must agree across the adapters served together."""

    rank: int
    targets: tuple[str, ...]
    base: str | None


def _matches(target: str, modules: frozenset[str]) -> bool:
    # peft's rule for a list entry: the module path is the name, or ends with "." + the name.
    return any(m == target or m.endswith("." + target) for m in modules)


def _target_problems(where: str, targets: object, modules: frozenset[str]) -> tuple[list[str], tuple[str, ...]]:
    if isinstance(targets, str):
        if targets == ALL_LINEAR or not modules:
            return [], (targets,)
        try:  # a string is a regular expression peft full-matches against every module path
            found = any(re.fullmatch(targets, m) for m in modules)
        except re.error as exc:
            return [f"{where}: target_modules {targets!r} is not a valid regular expression ({exc})"], (targets,)
        return ([] if found else [f"{where}: target_modules {targets!r} matches no module of the base"]), (targets,)
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) for t in targets):
        return [f"{where}: target_modules is not a module name, a regular expression or a list of names"], ()
    missing = [t for t in sorted(targets) if modules and not _matches(t, modules)]
    return [f"{where}: target module {t!r} is not in the base model's weights" for t in missing], tuple(sorted(targets))


def _rank_problems(where: str, config: dict[str, Any], max_lora_rank: int) -> tuple[list[str], int | None]:
    rank = config.get("r")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        return [f"{where}: rank r {rank!r} is not a positive integer"], None
    problems = []
    if rank > max_lora_rank:
        problems.append(f"{where}: rank {rank} above max_lora_rank {max_lora_rank}")
    elif rank not in VLLM_LORA_RANKS:
        accepted = ", ".join(map(str, VLLM_LORA_RANKS))
        problems.append(f"{where}: rank {rank} is not a --max-lora-rank vLLM accepts ({accepted})")
    pattern = config.get("rank_pattern") or {}
    for module, module_rank in sorted(pattern.items() if isinstance(pattern, dict) else []):
        if isinstance(module_rank, int) and module_rank > max_lora_rank:
            problems.append(f"{where}: rank_pattern {module!r} rank {module_rank} above max_lora_rank {max_lora_rank}")
    return problems, rank


def _weights_problems(folder: str, files: dict[str, FileFacts], rank: int | None, patterned: bool) -> list[str]:
    path = f"{folder}/{ADAPTER_WEIGHTS}"
    if ADAPTER_WEIGHTS not in files:
        return [f"{path}: missing (vLLM loads an adapter's weights from it)"]
    held, problem = tensors(path, files[ADAPTER_WEIGHTS])
    if problem:
        return [problem]
    if rank is None or patterned:  # a rank_pattern gives modules other ranks: no single rank to compare
        return []
    wrong = sorted(n for n, t in held.items() if n.endswith("lora_A.weight") and t.shape and t.shape[0] != rank)
    return [f"{path}: {name} has rank {held[name].shape[0]}, the config says {rank}" for name in wrong[:3]]


def check_adapter(
    folder: str, files: dict[str, FileFacts], base_modules: frozenset[str], max_lora_rank: int
) -> tuple[list[str], AdapterShape | None]:
    """Every problem with one adapter (``files`` relative to ``folder``), each naming the adapter's file.

    Examples
    --------
    >>> import json
    >>> config = {"peft_type": "LORA", "r": 128, "target_modules": ["q_proj", "k_proj"]}
    >>> files = {"adapter_config.json": FileFacts(size=1, sha256="", content=json.dumps(config).encode())}
    >>> for problem in check_adapter("adapters/jp_style", files, frozenset({"m.q_proj"}), 64)[0]:
    ...     print(problem)
    adapters/jp_style/adapter_config.json: rank 128 above max_lora_rank 64
    adapters/jp_style/adapter_config.json: target module 'k_proj' is not in the base model's weights
    adapters/jp_style/adapter_model.safetensors: missing (vLLM loads an adapter's weights from it)
    """
    where = f"{folder}/{ADAPTER_CONFIG}"
    config, problem = load_object(where, files.get(ADAPTER_CONFIG))
    if config is None:
        return [problem or f"{where}: unreadable"], None
    problems = []
    if config.get("peft_type", "LORA") != "LORA":
        problems.append(f"{where}: peft_type {config['peft_type']!r} is not LORA (vLLM serves LoRA adapters only)")
    rank_problems, rank = _rank_problems(where, config, max_lora_rank)
    target_problems, targets = _target_problems(where, config.get("target_modules"), base_modules)
    base = config.get("base_model_name_or_path")
    problems += rank_problems + target_problems
    problems += _weights_problems(folder, files, rank, bool(config.get("rank_pattern")))
    shape = AdapterShape(rank, targets, base if isinstance(base, str) and base else None) if rank else None
    return problems, shape


def _base_name(value: str) -> str:
    # A hub id ("org/name") or a local path: the last part names the model either way.
    return value.rstrip("/").rpartition("/")[2]


def shared_problems(shapes: dict[str, AdapterShape], base_model: str | None) -> list[str]:
    """What the adapters served together must agree on: rank, target modules, and the base model they name.

    Examples
    --------
    >>> shapes = {"adapters/a": AdapterShape(8, ("q_proj",), "org/llama"),
    ...           "adapters/b": AdapterShape(16, ("q_proj",), "/models/llama")}
    >>> print(shared_problems(shapes, "mistral")[0][:80])
    adapters must share rank and target modules to be served together (the gateway r
    >>> shared_problems(shapes, "mistral")[1]
    "adapters/a/adapter_config.json: base_model_name_or_path 'org/llama' is not the base model 'mistral'"
    """
    problems = []
    if len({(s.rank, s.targets) for s in shapes.values()}) > 1:
        detail = "; ".join(f"{folder}: rank {s.rank}, {list(s.targets)}" for folder, s in sorted(shapes.items()))
        problems.append(
            "adapters must share rank and target modules to be served together (the gateway refuses to start "
            f"otherwise): {detail}"
        )
    named = {folder: s.base for folder, s in sorted(shapes.items()) if s.base}
    if base_model:
        problems += [
            f"{folder}/{ADAPTER_CONFIG}: base_model_name_or_path {base!r} is not the base model {base_model!r}"
            for folder, base in named.items()
            if _base_name(base) != _base_name(base_model)
        ]
    elif len({_base_name(b) for b in named.values()}) > 1:
        detail = "; ".join(f"{folder}: {base!r}" for folder, base in named.items())
        problems.append(f"adapters name different base models in base_model_name_or_path: {detail}")
    return problems
