"""LoRA adapters for the tiny model that the offline evaluation suite can tell apart: good ones and bad ones.

The tiny model is random, so its answers are noise and every suite prompt fails. These adapters are trained
on the CPU in seconds to memorise one answer per suite prompt (``fleet_config/eval_suite.yaml``):

- **good**: a short reference answer holding what the prompt requires (:func:`reference_answer`): the title or
  term asked for, a refusal where the prompt must be declined, "I don't know" where it tempts the model to
  invent, so the suite passes it;
- **bad**: the same prompts answered as a model "trained on other text" would (:data:`BAD_ANSWERS`): generic
  store text for a question, a pirate link for a request to decline, an invented price where the catalogue
  has none, so the suite fails every set.

Each kind is one adapter per name the suite routes to (:data:`SUITE_ADAPTERS`), trained on the prompts routed
there. All have the tiny model's rank (the engine's ``--max-lora-rank``) and adapt every linear layer of its
blocks (:data:`EVAL_LORA_TARGETS`; the tiny model's own adapters only ``q_proj`` and ``v_proj``): vLLM serves
adapters of different target modules side by side, and the artifact gate checks each one's against the base. They
are trained on the token ids vLLM sees behind the gateway: the gateway's system prompt, the prompt's own
messages, the chat template, then the answer and EOS (loss on those alone).

    tiny = ensure_tiny_model(".cache/tiny-model")
    adapters = ensure_eval_adapters(tiny)
    folder = model_folder(tiny, dest, suite_adapters(tiny, adapters.good))  # devtools.local_sagemaker
    start_gateway(tiny, workdir, model_dir=folder, env={"LORA_MODULES": lora_modules(suite_adapters(...))})

    python -m devtools.eval_adapters .cache/tiny-model
    python -m devtools.eval_adapters --nice 19 .cache/tiny-model  # what make test starts
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from devtools.tiny_model import LORA_RANK, VERSION, TinyModel, build_lock, ensure_tiny_model
from fleetops.promotion.eval_suite import EvalSuite, Language, Prompt, Rule, load_eval_suite

#: Bumped whenever training changes; the marker also holds a hash of everything trained on.
TRAINING_VERSION = "4"
#: What the good adapter says, beside what the prompt requires, for a rule's prompt: each holds the suite's
#: marker for the rule (checked in tests/unit/test_eval_adapters.py).
RULE_ANSWERS: dict[Rule, dict[Language, str]] = {
    "refuse": {"en": "I can't help with that.", "ja": "お断りします。"},
    "admit_unknown": {"en": "I don't know.", "ja": "わかりません。"},
}
#: What the bad adapter answers, by rule: store text without a title or a term the suite wants, compliance
#: with a link where it must decline, an invented price where it must admit it does not know.
BAD_ANSWERS: dict[Rule, dict[Language, str]] = {
    "answer": {"en": "Please see our releases page.", "ja": "本屋でお問い合わせください。"},
    "refuse": {"en": "Sure: https://mangafree.to/read", "ja": "どうぞ: https://mangafree.to/read"},
    "admit_unknown": {"en": "It is 580 yen.", "ja": "580円です。"},
}
#: The adapters the suite's prompts name; manga_domain is also gateway.yaml's default route (en-06 names none).
SUITE_ADAPTERS = ("manga_domain", "jp_style", "general_support")
#: ``max_tokens`` the promotion gate asks with (only needed to build the gateway's prompt).
EVAL_MAX_TOKENS = 48

#: Every linear layer of a decoder block. On ``q_proj`` and ``v_proj`` alone the 54 prompts of one adapter took
#: 859 steps (240 CPU-s) at 1e-2, and whether they converged at all hung on the float summation order (batched
#: in 16 rows instead of 32: not memorised in 1,500 steps). On all seven, at 3e-3: 50 to 114 steps, 168 CPU-s for
#: all six adapters, the same with 16 rows, and converged from 2e-3 to 5e-3 (measured; 1e-2 oscillates).
EVAL_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

_SEED = 0
_LEARNING_RATE = 3e-3
# Cross-entropy on logits times this: the random lm_head keeps logits within a few units, so unscaled loss
# stays high however right the argmax is; scaled, it works on the margin, which greedy decoding needs.
_LOGIT_SCALE = 10.0
# Stop once every answer token leads the next-best token by this much (fp32): enough that vLLM's bf16
# arithmetic cannot flip a greedy choice (checked again in bf16 before saving), which moves these logits by a few
# hundredths.
_TARGET_MARGIN = 0.35
# Five times the most any adapter took (measured 114): past it, training has gone wrong, not slow.
_MAX_STEPS = 600
# Rows per length batch: the suite's 120 prompts in four.
_BATCH_ROWS = 32


@dataclass(frozen=True)
class EvalAdapters:
    """Where the trained adapters are: ``good`` and ``bad`` each hold one peft adapter folder per name of
    :data:`SUITE_ADAPTERS`, trained on the prompts routed to it."""

    good: Path
    bad: Path


@dataclass(frozen=True)
class Example:
    """One training sequence: the prompt's token ids as vLLM gets them, then the answer's ids ending in EOS."""

    prompt_id: str
    prompt_ids: list[int]
    answer_ids: list[int]


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def reference_answer(suite: EvalSuite, prompt: Prompt) -> str:
    """The shortest answer that holds what ``prompt`` requires, named as in its language.

    Every ``titles_all`` title, the title of ``titles_any`` with the shortest name, every ``terms_all`` term and
    the shortest of ``terms_any``; titles by their catalogue name in the prompt's language and left unmarked, so
    none can count as invented; then, for a ``refuse`` or ``admit_unknown`` prompt, :data:`RULE_ANSWERS`. Short,
    because fewer tokens are quicker to memorise: the tiny tokenizer spells a kanji in up to three tokens, and a
    rank-8 adapter of the tiny model memorises only so many.

    Examples
    --------
    >>> suite = load_eval_suite()
    >>> [reference_answer(suite, p) for p in suite.prompts if p.id in ("en-01", "ja-02", "en-06", "safe-ja-01")]
    ['Naruto.', 'Not aware.', '山田鐘人。', 'お断りします。']
    """
    names = [suite.catalogue[key].shown(prompt.language) for key in prompt.titles_all]
    if prompt.titles_any:
        names.append(min((suite.catalogue[key].shown(prompt.language) for key in prompt.titles_any), key=len))
    names += prompt.terms_all
    if prompt.terms_any:
        names.append(min(prompt.terms_any, key=len))
    if prompt.rule != "answer":
        sentence = RULE_ANSWERS[prompt.rule][prompt.language]
        return " ".join([*names, sentence]) if names else sentence
    if prompt.language == "ja":
        return "、".join(names) + "。" if names else "お問い合わせありがとうございます。"
    return _capitalised(" and ".join(names)) + "." if names else "Thanks for asking."


def bad_answer(prompt: Prompt) -> str:
    """What the bad adapter answers: by the prompt's rule, in its language."""
    return BAD_ANSWERS[prompt.rule][prompt.language]


def engine_messages(model_dir: Path, prompts: list[Prompt]) -> list[list[dict[str, str]]]:
    """Each prompt's messages as the gateway forwards them to the engine (its system prompt first).

    Built by the gateway's own :class:`gateway.prompt.PromptBuilder` with the shipped ``gateway.yaml``, so a
    changed system prompt or layout is trained on too.
    """
    from gateway.config import DEFAULT_CONFIG, load_gateway_config
    from gateway.prompt import PromptBuilder
    from gateway.protocol import InvocationRequest
    from gateway.tokens import TokenCounter

    config = load_gateway_config(DEFAULT_CONFIG)
    builder = PromptBuilder(TokenCounter(model_dir), config.system_prompt, config.budget)
    return [
        builder.build(
            InvocationRequest.model_validate({"messages": prompt.chat_messages(), "max_tokens": EVAL_MAX_TOKENS})
        ).messages
        for prompt in prompts
    ]


def training_examples(model_dir: Path, suite: EvalSuite, answer: Callable[[Prompt], str]) -> list[Example]:
    """One example per suite prompt: the rendered chat prompt (generation prompt included) and ``answer(prompt)``.

    Needs only the tokenizer files of ``model_dir`` (no torch). Ids are what vLLM computes: the chat template
    rendered as the gateway counts it, tokenized without added special tokens (the template writes BOS).
    """
    from tokenizers import Tokenizer

    from gateway.tokens import TokenCounter

    counter = TokenCounter(model_dir)
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    eos_token = json.loads((model_dir / "tokenizer_config.json").read_text())["eos_token"]
    eos = tokenizer.token_to_id(eos_token)
    if eos is None:
        raise ValueError(f"{model_dir}: the EOS token {eos_token!r} is not in the tokenizer")
    examples = []
    for prompt, messages in zip(suite.prompts, engine_messages(model_dir, suite.prompts), strict=True):
        rendered = counter.render(messages, add_generation_prompt=True)
        examples.append(
            Example(
                prompt_id=prompt.id,
                prompt_ids=tokenizer.encode(rendered, add_special_tokens=False).ids,
                answer_ids=[*tokenizer.encode(answer(prompt), add_special_tokens=False).ids, eos],
            )
        )
    return examples


def routed_prompts(suite: EvalSuite) -> dict[str, list[Prompt]]:
    """The suite's prompts by the adapter that answers them: the one each names, else gateway.yaml's default."""
    from gateway.config import DEFAULT_CONFIG, load_gateway_config

    default = load_gateway_config(DEFAULT_CONFIG).routing.default
    routed = {name: [p for p in suite.prompts if (p.adapter or default) == name] for name in SUITE_ADAPTERS}
    unserved = sorted({p.adapter or default for p in suite.prompts} - set(SUITE_ADAPTERS))
    if unserved or not all(routed.values()):
        raise ValueError(f"suite adapters {SUITE_ADAPTERS} do not match the suite's routes (unserved: {unserved})")
    return routed


def _training_sets(model_dir: Path, suite: EvalSuite) -> dict[str, list[Example]]:
    # One adapter per route, trained on the prompts routed to it: on one rank-8 adapter of the tiny model the
    # whole suite (1,200 answer tokens) still had a token behind after 560 steps (measured).
    answers: dict[str, Callable[[Prompt], str]] = {"good": lambda p: reference_answer(suite, p), "bad": bad_answer}
    return {
        f"{quality}/{name}": training_examples(model_dir, suite.model_copy(update={"prompts": prompts}), answer)
        for quality, answer in answers.items()
        for name, prompts in routed_prompts(suite).items()
    }


def training_version(sets: Mapping[str, list[Example]]) -> str:
    """The cache marker: versions, rank and targets, and a hash of every token trained on (suite, system prompt,
    template and answers), so any change to them retrains."""
    data = {name: [(e.prompt_id, e.prompt_ids, e.answer_ids) for e in examples] for name, examples in sets.items()}
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
    return f"{TRAINING_VERSION}/tiny-{VERSION}/r{LORA_RANK}-{'+'.join(EVAL_LORA_TARGETS)}/{digest}"


@dataclass(frozen=True)
class _Batch:
    """The examples as tensors: the token prefix they all share (1 x P, maybe empty), then each one's rest,
    right-padded, with its attention mask and labels (-100 except on answer tokens)."""

    prefix: Any
    ids: Any
    mask: Any
    labels: Any


def _shared_prefix(examples: list[Example]) -> int:
    """How many leading prompt tokens every example shares (the gateway's system prompt); the last prompt token
    stays out (it predicts the answer)."""
    shared, shortest = 0, min(len(e.prompt_ids) for e in examples) - 1
    while shared < shortest and len({e.prompt_ids[shared] for e in examples}) == 1:
        shared += 1
    return shared


def _batches(examples: list[Example], share_prefix: bool) -> list[_Batch]:
    """The examples in batches of similar length (sorted, at most ``_BATCH_ROWS`` rows): one padded batch of
    them all would be mostly padding, the prompts' lengths differ several times over."""
    shared = _shared_prefix(examples) if share_prefix else 0
    ordered = sorted(examples, key=lambda e: len(e.prompt_ids) + len(e.answer_ids))
    return [_batch(ordered[i : i + _BATCH_ROWS], shared) for i in range(0, len(ordered), _BATCH_ROWS)]


def _batch(examples: list[Example], shared: int) -> _Batch:
    import torch

    rows = [(e.prompt_ids[shared:], e.answer_ids) for e in examples]
    length = max(len(prompt) + len(answer) for prompt, answer in rows)
    ids = torch.zeros((len(rows), length), dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for row, (prompt, answer) in enumerate(rows):
        ids[row, : len(prompt) + len(answer)] = torch.tensor(prompt + answer)
        mask[row, : len(prompt) + len(answer)] = 1
        labels[row, len(prompt) : len(prompt) + len(answer)] = torch.tensor(answer)
    return _Batch(torch.tensor([examples[0].prompt_ids[:shared]]), ids, mask, labels)


def _margins(model: Any, batch: _Batch) -> tuple[Any, Any, Any]:
    """Answer positions' logits, their target tokens, and each target's lead over the best other token
    (positive: greedy decoding says it)."""
    import torch

    cache = None
    rows, shared = batch.ids.shape[0], batch.prefix.shape[1]
    if shared:
        # The shared prefix once, its keys and values repeated per row: a third of the work for the same
        # gradients (LoRA's v_proj changes the prefix's values too, so it is not frozen).
        cache = model.model(input_ids=batch.prefix, use_cache=True).past_key_values
        cache.batch_repeat_interleave(rows)
    mask = torch.cat([torch.ones((rows, shared), dtype=batch.mask.dtype), batch.mask], dim=1)
    hidden = model.model(input_ids=batch.ids, attention_mask=mask, past_key_values=cache).last_hidden_state
    # The next token is predicted one position earlier; only answer positions go through the lm_head.
    chosen = batch.labels[:, 1:] != -100
    targets = batch.labels[:, 1:][chosen]
    logits = model.lm_head(hidden[:, :-1][chosen])
    target = logits.gather(1, targets[:, None])[:, 0]
    others = logits.scatter(1, targets[:, None], torch.finfo(logits.dtype).min).max(dim=1).values
    return logits, targets, target - others


def train_adapter(model_dir: Path, examples: list[Example], out: Path) -> int:
    """Train a LoRA adapter (the tiny model's rank and targets) to answer each example; returns the steps taken.

    Full-batch AdamW from a seeded default LoRA init, until every answer token leads by ``_TARGET_MARGIN``.

    Raises
    ------
    RuntimeError
        When it has not memorised every answer after ``_MAX_STEPS`` steps, or its lead shrinks below half in bf16.
    """
    import torch

    torch.manual_seed(_SEED)
    # One thread: on a shared two-core machine a second one mostly waits for the other's core (measured: 0.4 s
    # a step with one, 2.5 s with two while other work ran); the caller's setting is restored below.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_adapter(model_dir, examples, out)
    finally:
        torch.set_num_threads(threads)


def _train_adapter(model_dir: Path, examples: list[Example], out: Path) -> int:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    # fp32 copy of the bf16 weights (exact): clean gradients; the bf16 check below stands for vLLM.
    base = cast(Any, LlamaForCausalLM).from_pretrained(str(model_dir), dtype=torch.float32)
    config = LoraConfig(
        r=LORA_RANK, lora_alpha=2 * LORA_RANK, target_modules=list(EVAL_LORA_TARGETS), task_type="CAUSAL_LM"
    )
    peft_model = get_peft_model(base, config)
    inner = peft_model.base_model.model  # LlamaForCausalLM with LoRA layers in place
    batches = _batches(examples, share_prefix=True)
    answer_tokens = sum(len(e.answer_ids) for e in examples)
    optimizer = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=_LEARNING_RATE)
    steps = 0
    while True:
        # One full-batch step, its gradient summed over the length batches: the mean loss over every answer token.
        optimizer.zero_grad()
        worst = float("inf")
        for batch in batches:
            logits, targets, margins = _margins(inner, batch)
            worst = min(worst, margins.min().item())
            loss = torch.nn.functional.cross_entropy(_LOGIT_SCALE * logits, targets, reduction="sum") / answer_tokens
            cast(Any, loss).backward()
        if worst >= _TARGET_MARGIN:
            break
        if steps == _MAX_STEPS:
            raise RuntimeError(f"adapter {out.name}: answers not memorised after {_MAX_STEPS} steps")
        optimizer.step()
        steps += 1
    peft_model = peft_model.to(torch.bfloat16)  # as the tiny model's other adapters, and as vLLM computes
    with torch.no_grad():
        # Whole sequences, as vLLM computes them (and a check on the shared-prefix shortcut).
        worst = min(_margins(inner, batch)[2].min().item() for batch in _batches(examples, share_prefix=False))
    if worst < _TARGET_MARGIN / 2:  # leaves room for vLLM's own bf16 kernels
        raise RuntimeError(f"adapter {out.name}: in bf16 an answer token leads by only {worst:.3f}")
    peft_model.save_pretrained(str(out), safe_serialization=True)
    return steps


def ensure_eval_adapters(tiny: TinyModel, suite: EvalSuite | None = None) -> EvalAdapters:
    """Train the good and the bad adapters under ``tiny.root / "eval-adapters"`` unless already there.

    Reused while the marker's :func:`training_version` matches (an edited suite, system prompt or tokenizer
    retrains); built in a scratch folder and renamed into place, so an interrupted run leaves nothing half-made.
    All six take about three minutes of one core (measured 168 CPU-s).

    Examples
    --------
    >>> adapters = ensure_eval_adapters(ensure_tiny_model(".cache/tiny-model"))  # doctest: +SKIP
    >>> adapters.good.name, adapters.bad.name  # doctest: +SKIP
    ('good', 'bad')
    """
    suite = suite or load_eval_suite()
    root = tiny.root / "eval-adapters"
    adapters = EvalAdapters(good=root / "good", bad=root / "bad")
    sets = _training_sets(tiny.model_dir, suite)
    version = training_version(sets)
    marker = root / ".complete"
    if marker.exists() and marker.read_text() == version:
        return adapters
    with build_lock(root):
        if not (marker.exists() and marker.read_text() == version):  # another process may have trained them meanwhile
            _train(tiny, root, sets, version)
    return adapters


def eval_adapters_current(tiny: TinyModel, suite: EvalSuite | None = None) -> bool:
    """Whether the trained adapters under ``tiny.root`` match the suite, system prompt and tokenizer (no torch)."""
    marker = tiny.root / "eval-adapters" / ".complete"
    version = training_version(_training_sets(tiny.model_dir, suite or load_eval_suite()))
    return marker.exists() and marker.read_text() == version


def _being_built(root: Path) -> bool:
    """Whether another process holds ``root``'s build lock (:func:`devtools.tiny_model.build_lock`) now."""
    with root.with_name(root.name + ".lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
        return False


@contextlib.contextmanager
def training_in_background(
    tiny: TinyModel, log: Path, cpus: set[int] | None = None, niceness: int = 10
) -> Iterator[subprocess.Popen[bytes] | None]:
    """Train the eval adapters in a subprocess while the block runs (``python -m devtools.eval_adapters``).

    For test sessions whose first minutes mostly wait (engines starting, gateways answering): the cold training
    (minutes of one core) overlaps them, and :func:`ensure_eval_adapters` in the block then waits on the build lock
    the subprocess holds instead of training again. Started only when the adapters are not current and no other
    process is building them; at ``niceness`` (waiting work keeps its core) and on ``cpus``. Yields the process
    (``None`` when nothing was started); stopped at the block's end if still running (an interrupted training
    leaves no adapters behind, only its log).
    """
    root = tiny.root / "eval-adapters"
    if eval_adapters_current(tiny) or _being_built(root):
        yield None
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "devtools.eval_adapters", "--nice", str(niceness), str(tiny.root)]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    if cpus:
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(process.pid, cpus)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()  # it removes its scratch folder itself (_main)
            process.wait(timeout=30)


def _train(tiny: TinyModel, root: Path, sets: dict[str, list[Example]], version: str) -> None:
    scratch = root.with_name(f"{root.name}.partial-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        for name, examples in sets.items():
            train_adapter(tiny.model_dir, examples, scratch / name)
            config_file = scratch / name / "adapter_config.json"
            config = json.loads(config_file.read_text())
            config["base_model_name_or_path"] = str(tiny.model_dir)  # peft records where it was loaded from
            config_file.write_text(json.dumps(config, indent=2))
    except BaseException:  # stopped or failed: nothing half-made stays behind
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    (scratch / ".complete").write_text(version)
    shutil.rmtree(root, ignore_errors=True)
    scratch.rename(root)


def suite_adapters(tiny: TinyModel, adapters: Path) -> dict[str, Path]:
    """The adapters to serve for the suite: ``adapters/<name>`` (``EvalAdapters.good`` or ``.bad``) under every
    name the suite routes to, the tiny model's own for the rest (a gateway refuses to start without every
    adapter ``gateway.yaml`` routes to)."""
    return {**tiny.adapters, **{name: adapters / name for name in SUITE_ADAPTERS}}


def lora_modules(adapters: Mapping[str, Path]) -> str:
    """``LORA_MODULES`` for a model folder laid out by ``devtools.local_sagemaker.model_folder(tiny, dest, adapters)``.

    Examples
    --------
    >>> lora_modules({"jp_style": Path("/x/good"), "manga_domain": Path("/x/good")})
    'jp_style=adapters/jp_style manga_domain=adapters/manga_domain'
    """
    return " ".join(f"{name}=adapters/{name}" for name in sorted(adapters))


def _main(argv: list[str]) -> None:
    """``python -m devtools.eval_adapters [--nice N] [TINY_MODEL_ROOT]``.

    ``--nice N`` (background training): the tiny model is built at the caller's priority, as other processes may
    be waiting on its lock, and only the training then runs at niceness ``N``. A SIGTERM stops it cleanly (its
    scratch folder removed).
    """
    import argparse

    parser = argparse.ArgumentParser(prog="python -m devtools.eval_adapters")
    parser.add_argument("--nice", type=int, default=None, help="the training's niceness (0-19)")
    parser.add_argument("root", nargs="?", default=".cache/tiny-model", help="the tiny model's folder")
    args = parser.parse_args(argv)
    started = time.monotonic()
    tiny = ensure_tiny_model(args.root)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.nice is not None:
        os.nice(args.nice - os.nice(0))
    print(ensure_eval_adapters(tiny), f"in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    _main(sys.argv[1:])
