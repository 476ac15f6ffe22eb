"""A tiny, randomly initialised Llama with a locally trained tokenizer and LoRA adapters.

No model hub is reachable here, so tests, benchmarks and the demo generate what the real vLLM engine
serves: 2 layers, hidden 128, 2 heads of 64 (head_dim 16 kills vLLM's CPU attention kernel), bf16
safetensors, a byte-level BPE tokenizer trained on generated English + Japanese text, a chat template,
three LoRA adapters with the same rank and target modules, and one deliberately mismatched adapter.
:mod:`devtools.eval_adapters` trains two more, a good and a bad one for the offline evaluation suite.

    python -m devtools.tiny_model .cache/tiny-model

Generation is idempotent: a finished directory (marked by ``.complete``) is reused as is.
"""

from __future__ import annotations

import fcntl
import json
import random
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

#: Adapters that share rank and target modules (what the gateway routes to).
ADAPTERS = ("manga_domain", "general_support", "jp_style")
#: An adapter with another rank and other target modules: the gateway must refuse to start with it.
MISMATCHED_ADAPTER = "mismatched_rank"
LORA_RANK = 8
LORA_TARGETS = ("q_proj", "v_proj")
VOCAB_SIZE = 3000
#: Bumped whenever the generated files change, so stale caches are rebuilt.
VERSION = "2"

#: The chat template vLLM renders and the gateway counts with (BOS + one block per message).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>"]

_EN_TEXT = (
    "manga chapter volume release store order shipping price author artist series story hero villain "
    "page panel colour edition preorder delivery account refund help question answer recommend shonen "
    "seinen shojo romance action comedy mystery the a is to of and in for with on my your this that "
    "when where what how can please thanks new latest weekly monthly digital print box set"
)
_JA_PHRASES = (
    "こんにちは",
    "ありがとうございます",
    "漫画",
    "最新刊",
    "発売日",
    "予約",
    "配送",
    "おすすめ",
    "少年",
    "少女",
    "第一巻",
    "作者",
    "物語",
    "お問い合わせ",
    "よろしくお願いします",
    "ワンピース",
    "進撃の巨人",
    "鬼滅の刃",
    "東京",
    "本屋",
)


@dataclass(frozen=True)
class TinyModel:
    """Paths of a generated model directory."""

    root: Path
    adapters: dict[str, Path] = field(default_factory=dict)
    mismatched_adapter: Path | None = None

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    @property
    def adapters_dir(self) -> Path:
        return self.root / "adapters"


def _corpus(lines: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    en_words = _EN_TEXT.split()
    out = []
    for _ in range(lines):
        words = [rng.choice(en_words) for _ in range(rng.randint(5, 20))]
        for _ in range(rng.randint(0, 3)):
            words.insert(rng.randrange(len(words) + 1), rng.choice(_JA_PHRASES))
        out.append(" ".join(words) + rng.choice([".", "?", "!", "。", "\uff1f"]))
    return out


def write_tokenizer(model_dir: Path) -> None:
    """Train the byte-level BPE tokenizer and write it with the chat template (no torch needed)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(4000), trainer=trainer)
    tokenizer.save(str(model_dir / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
        "model_max_length": 2048,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (model_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False))
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
    (model_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2))


def _write_model(model_dir: Path) -> None:
    import torch
    from tokenizers import Tokenizer
    from transformers import LlamaConfig, LlamaForCausalLM

    vocab = Tokenizer.from_file(str(model_dir / "tokenizer.json")).get_vocab_size()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=4096,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
        tie_word_embeddings=False,
        dtype="bfloat16",
    )
    model = cast(Any, LlamaForCausalLM)(config).to(torch.bfloat16)
    model.save_pretrained(str(model_dir), safe_serialization=True)


def _write_adapter(model_dir: Path, out: Path, seed: int, rank: int, targets: tuple[str, ...]) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    base = LlamaForCausalLM.from_pretrained(str(model_dir), dtype=torch.bfloat16)
    # init_lora_weights=False: random A and B, so each adapter really changes the output.
    config = LoraConfig(
        r=rank, lora_alpha=2 * rank, target_modules=list(targets), init_lora_weights=False, task_type="CAUSAL_LM"
    )
    peft_model = get_peft_model(base, config)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_" in name:
                param.mul_(4.0)  # strong enough that adapters visibly differ on a random model
    peft_model.save_pretrained(str(out), safe_serialization=True)


def write_truncated_vocab_model(model_dir: Path, out: Path, vocab_size: int = 512) -> Path:
    """Copy the model with its embedding and output layer cut to ``vocab_size`` rows; the tokenizer stays whole.

    A broken export of the kind that ships by mistake: it loads, serves the warm-up (whose tokens all lie
    below ``vocab_size``) and then kills the engine core on the first prompt with a higher token id
    (Japanese text, with this tokenizer). vLLM checks prompt ids against the tokenizer, not the weights.

    Examples
    --------
    >>> write_truncated_vocab_model(tiny.model_dir, Path("/tmp/broken"))  # doctest: +SKIP
    PosixPath('/tmp/broken')
    """
    from safetensors.torch import load_file, save_file

    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(model_dir, out)
    config = json.loads((out / "config.json").read_text())
    config["vocab_size"] = vocab_size
    (out / "config.json").write_text(json.dumps(config, indent=2))
    weights = load_file(str(out / "model.safetensors"))
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        weights[name] = weights[name][:vocab_size].contiguous()
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def write_broken_tokenizer_model(model_dir: Path, out: Path) -> Path:
    """Copy the model with ``tokenizer.json`` cut off halfway, as an interrupted upload or copy leaves it.

    The engine cannot load it; the artifact gate refuses it before anything is deployed.
    """
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(model_dir, out)
    tokenizer = out / "tokenizer.json"
    tokenizer.write_bytes(tokenizer.read_bytes()[: tokenizer.stat().st_size // 2])
    return out


@contextmanager
def build_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock beside ``folder`` while it is checked and built, so that parallel test processes
    (pytest-xdist workers) build a cache once and never swap it out under one another."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with folder.with_name(folder.name + ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_tiny_model(root: str | Path) -> TinyModel:
    """Generate the tiny model, tokenizer and adapters under ``root`` unless already there.

    Parameters
    ----------
    root
        A cache folder (git-ignored, e.g. ``.cache/tiny-model``).

    Returns
    -------
    TinyModel
        Where the model, the three compatible adapters and the mismatched adapter are.

    Examples
    --------
    >>> tiny = ensure_tiny_model(".cache/tiny-model")  # doctest: +SKIP
    >>> sorted(tiny.adapters)  # doctest: +SKIP
    ['general_support', 'jp_style', 'manga_domain']
    """
    root = Path(root).resolve()
    tiny = TinyModel(
        root=root,
        adapters={name: root / "adapters" / name for name in ADAPTERS},
        mismatched_adapter=root / "mismatched" / MISMATCHED_ADAPTER,
    )
    marker = root / ".complete"
    if marker.exists() and marker.read_text() == VERSION:
        return tiny
    with build_lock(root):
        if not (marker.exists() and marker.read_text() == VERSION):  # another process may have built it meanwhile
            _build(root)
    return tiny


def _build(root: Path) -> None:
    # Build in a scratch folder and swap it in, so an interrupted run never leaves a half model behind.
    scratch = root.with_name(root.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "model").mkdir(parents=True)
    write_tokenizer(scratch / "model")
    _write_model(scratch / "model")
    for seed, name in enumerate(ADAPTERS, start=1):
        _write_adapter(scratch / "model", scratch / "adapters" / name, seed, LORA_RANK, LORA_TARGETS)
    _write_adapter(scratch / "model", scratch / "mismatched" / MISMATCHED_ADAPTER, 99, 4, ("k_proj", "o_proj"))
    for config_file in scratch.glob("*/*/adapter_config.json"):
        # peft records the scratch path; point it at where the base model will live.
        adapter_config = json.loads(config_file.read_text())
        adapter_config["base_model_name_or_path"] = str(root / "model")
        config_file.write_text(json.dumps(adapter_config, indent=2))
    (scratch / ".complete").write_text(VERSION)
    shutil.rmtree(root, ignore_errors=True)
    scratch.rename(root)


if __name__ == "__main__":
    print(ensure_tiny_model(sys.argv[1] if len(sys.argv) > 1 else ".cache/tiny-model"))
