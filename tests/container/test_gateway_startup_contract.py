"""The real entrypoint (``python -m gateway serve``) refuses a model that breaks the contract between the halves.

Each case exits 1 within seconds, before anything listens and before an engine starts, and names every
problem on stderr. No engine is needed: these checks run before the engine would start.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from devtools.emulator import free_port
from devtools.local_serving import CONTRACT, engine_env, engine_pids
from devtools.tiny_model import TinyModel
from fleetops.model_contract import ENGINE_KNOB_PREFIX, OWNED

pytestmark = pytest.mark.container


@pytest.fixture(scope="module")
def model_dir(tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model laid out as a SageMaker artifact: weights and tokenizer, adapters under adapters/."""
    model = tmp_path_factory.mktemp("artifact") / "model"
    model.mkdir()
    for item in tiny_model.model_dir.iterdir():
        os.symlink(item, model / item.name)
    (model / "adapters").mkdir(exist_ok=True)
    for name, path in tiny_model.adapters.items():
        os.symlink(path, model / "adapters" / name)
    return model


@dataclass
class Refusal:
    result: subprocess.CompletedProcess[str]
    seconds: float
    port: int
    engine_port: int


def serve(model_dir: Path, **variables: str) -> Refusal:
    """Run the entrypoint with the deployment variables and only ``variables`` of the model's contract."""
    base = {k: v for k, v in engine_env().items() if k not in OWNED and not k.startswith(ENGINE_KNOB_PREFIX)}
    port, engine_port = free_port(), free_port()
    env = {**base, "MODEL_DIR": str(model_dir), "PORT": str(port), "ENGINE_PORT": str(engine_port)}
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve"],
        env={**env, "BIND_HOST": "127.0.0.1", **variables},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return Refusal(result, time.monotonic() - started, port, engine_port)


def problems_of(refusal: Refusal) -> list[str]:
    """Exit 1 within seconds, nothing listening, no engine started; then the problems, one per line."""
    stderr = refusal.result.stderr
    assert refusal.result.returncode == 1, stderr
    assert refusal.seconds < 30, refusal.seconds  # imports on a loaded 2-core host; an engine start is 30-75 s
    lines = stderr.splitlines()
    assert "gateway: cannot start:" in lines, stderr
    start = lines.index("gateway: cannot start:")
    assert all(line.startswith("gateway: ") for line in lines[:start]), stderr  # notices first (the CUDA check's)
    lines = lines[start:]
    assert all(line.startswith("  - ") for line in lines[1:]), stderr
    assert engine_pids(refusal.engine_port) == []
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{refusal.port}/ping", timeout=2)
    return [line.removeprefix("  - ") for line in lines[1:]]


def test_no_contract(model_dir: Path) -> None:
    problems = problems_of(serve(model_dir))

    assert [p.split(" ")[0] for p in problems] == ["ENDPOINT_NAME", "VARIANT_NAME", "MODEL_VERSION"]
    assert all("is not set" in p for p in problems)


def test_an_adapter_in_lora_modules_that_is_not_in_the_artifact(model_dir: Path) -> None:
    modules = "manga_domain=adapters/manga_domain shonen_v9=adapters/shonen_v9"

    problems = problems_of(serve(model_dir, **CONTRACT, LORA_MODULES=modules))

    # gateway.yaml routes to general_support (six support intents) and jp_style (locale ja), which are not served.
    assert [p.split("'")[1] for p in problems[:7]] == [*["general_support"] * 6, "jp_style"]
    assert all("which LORA_MODULES does not serve (served: base, manga_domain, shonen_v9)" in p for p in problems[:7])
    assert problems[7] == (
        f"adapter 'shonen_v9': cannot read {model_dir}/adapters/shonen_v9/adapter_config.json: "
        "No such file or directory"
    )
    assert len(problems) == 8


def test_an_unknown_knob_and_a_malformed_value(model_dir: Path) -> None:
    knobs = {"SM_VLLM_MAX_NUM_SEQ": "8", "SM_VLLM_MAX_NUM_SEQS": "lots"}

    problems = problems_of(serve(model_dir, **CONTRACT, **knobs))

    assert problems[0].startswith("SM_VLLM_MAX_NUM_SEQ: unknown engine knob (known: SM_VLLM_MAX_NUM_SEQS, ")
    assert problems[1] == "SM_VLLM_MAX_NUM_SEQS: Input should be a valid integer, unable to parse string as an integer"
    assert len(problems) == 2


def test_a_max_model_len_the_budget_does_not_fit(model_dir: Path) -> None:
    problems = problems_of(serve(model_dir, **CONTRACT, SM_VLLM_MAX_MODEL_LEN="512"))

    assert problems == [
        "budget.max_tokens_limit (512) must be below the engine's max_model_len (512) "
        "(max_model_len from SM_VLLM_MAX_MODEL_LEN)"
    ]
