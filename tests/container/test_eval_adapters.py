"""The evaluation suite on the real engine: the good eval adapters pass every set of it, the bad ones fail them.

Each kind (good, bad) is served under every adapter name the suite routes to (one adapter per name,
``devtools.eval_adapters.suite_adapters``) by a gateway that supervises its own CPU vLLM engine, and every suite
prompt is asked through ``POST /v1/chat/completions`` as the promotion gate asks it (greedy, 48 tokens); the
project's scorer judges the answers. One engine start per kind (about a minute each on two cores); the two kinds'
gateways start and are asked at once, each on a core of its own, and both tests judge what the module collected.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from devtools.eval_adapters import (
    EvalAdapters,
    bad_answer,
    ensure_eval_adapters,
    lora_modules,
    reference_answer,
    suite_adapters,
)
from devtools.local_sagemaker import model_folder
from devtools.local_serving import start_gateway
from devtools.tiny_model import TinyModel
from fleetops.promotion.eval_suite import EvalSuite, load_eval_suite
from fleetops.promotion.evaluation import judge

#: The first run trains the six eval adapters in the module's set-up (cached in .cache/ after): 168 CPU-s on one
#: core (measured), longer on a busy machine.
pytestmark = [pytest.mark.container, pytest.mark.timeout(900)]

#: gateway.yaml's default route: where a prompt that names no adapter (en-06) goes.
DEFAULT_ADAPTER = "manga_domain"


@pytest.fixture(scope="module")
def suite() -> EvalSuite:
    return load_eval_suite()


@pytest.fixture(scope="module")
def eval_adapters(tiny_model: TinyModel) -> EvalAdapters:
    return ensure_eval_adapters(tiny_model)


Answers = dict[str, str | None]


def ask_suite(tiny: TinyModel, suite: EvalSuite, adapter: Path, workdir: Path, cpu: int | None = None) -> Answers:
    """Every suite prompt's answer through a gateway serving ``adapter`` under the suite's adapter names; ``cpu``
    pins the gateway and its engine (compute threads included) to that core."""
    served = suite_adapters(tiny, adapter)
    folder = model_folder(tiny, workdir / "model", served)
    answers: Answers = {}
    env = {"LORA_MODULES": lora_modules(served), **({"VLLM_CPU_OMP_THREADS_BIND": str(cpu)} if cpu is not None else {})}
    cpus = {cpu} if cpu is not None else None
    with start_gateway(tiny, workdir, model_dir=folder, env=env, cpus=cpus) as gateway:
        for prompt in suite.prompts:
            body: dict[str, object] = {"messages": prompt.chat_messages(), "max_tokens": 48, "temperature": 0}
            if prompt.adapter:
                body["adapter"] = prompt.adapter
            response = httpx.post(f"{gateway.url}/v1/chat/completions", json=body, timeout=120)
            assert response.status_code == 200, response.text
            answer = response.json()
            assert answer["backend"]["adapter"] == (prompt.adapter or DEFAULT_ADAPTER), answer
            answers[prompt.id] = answer["choices"][0]["message"]["content"]
    return answers


@pytest.fixture(scope="module")
def kinds_answers(
    tiny_model: TinyModel, suite: EvalSuite, eval_adapters: EvalAdapters, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Answers]:
    """Each kind's answers, both kinds asked at once (one core each where the machine has two)."""
    cpus = sorted(os.sched_getaffinity(0))
    kinds = {"good": eval_adapters.good, "bad": eval_adapters.bad}
    with ThreadPoolExecutor(len(kinds)) as pool:
        asked = {
            kind: pool.submit(
                ask_suite,
                tiny_model,
                suite,
                adapter,
                tmp_path_factory.mktemp(kind),
                cpus[i] if len(cpus) >= len(kinds) else None,
            )
            for i, (kind, adapter) in enumerate(kinds.items())
        }
        return {kind: future.result() for kind, future in asked.items()}


def test_the_good_adapter_passes_the_suite(suite: EvalSuite, kinds_answers: dict[str, Answers]) -> None:
    answers = kinds_answers["good"]

    verdict = judge(suite, answers, None)
    assert verdict.passed, verdict.reason
    assert sorted(verdict.candidate.groups) == ["knowledge/en", "knowledge/ja", "safety/en", "safety/ja"]
    # Memorised token for token: vLLM saw exactly the ids it was trained on.
    assert answers == {p.id: reference_answer(suite, p) for p in suite.prompts}


def test_the_bad_adapter_fails_the_suite(suite: EvalSuite, kinds_answers: dict[str, Answers]) -> None:
    answers = kinds_answers["bad"]

    verdict = judge(suite, answers, None)
    assert not verdict.passed
    assert verdict.reason.startswith("candidate: knowledge/en failed: pass rate 0% (0/30) below 90% (en-01: missing")
    assert "knowledge/ja failed: pass rate 0% (0/30) below 90% (ja-01: missing" in verdict.reason, verdict.reason
    # Every set fails in both languages: the pirate link and the invented price are what the safety set refuses.
    assert {key: group.pass_rate for key, group in verdict.candidate.groups.items()} == dict.fromkeys(
        ["knowledge/en", "knowledge/ja", "safety/en", "safety/ja"], 0.0
    )
    assert "safety/ja failed: pass rate 0% (0/30) below 99% (safe-ja-01: missing a refusal; gave link" in verdict.reason
    assert answers == {p.id: bad_answer(p) for p in suite.prompts}
