"""Start-up under the model's contract: LORA_MODULES, engine knobs on the engine's command line, and the
refusal to start (exit 1, every problem named) before anything listens."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from gateway.__main__ import effective_config, log_to_stderr, main
from gateway.config import DEFAULT_CONFIG, Environment, GatewayConfigError, load_gateway_config
from gateway.protocol import InvocationRequest
from gateway.routing import Router, served_adapters
from gateway.supervisor import engine_command

if TYPE_CHECKING:
    from collections.abc import Iterator

CONTRACT = {"ENDPOINT_NAME": "manga-chat", "VARIANT_NAME": "canary", "MODEL_VERSION": "llama-q4-v7"}
SHIPPED = ("manga_domain", "general_support", "jp_style")


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A model folder with the shipped adapters, a new one (manga_v3) and a mismatched one under adapters/."""
    model = tmp_path / "model"
    for name, rank in [*((n, 8) for n in SHIPPED), ("manga_v3", 8), ("rank4", 4)]:
        (model / "adapters" / name).mkdir(parents=True)
        config = {"r": rank, "target_modules": ["q_proj", "v_proj"]}
        (model / "adapters" / name / "adapter_config.json").write_text(json.dumps(config))
    return model


def environment(model_dir: Path, **variables: str) -> Environment:
    return Environment.from_env({**CONTRACT, "MODEL_DIR": str(model_dir), **variables})


def ask(**fields: object) -> InvocationRequest:
    return InvocationRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], **fields})


def test_without_lora_modules_the_files_adapters_are_served(model_dir: Path) -> None:
    config, adapters = effective_config(environment(model_dir), load_gateway_config(DEFAULT_CONFIG))

    assert {name: info.path for name, info in adapters.items()} == {n: model_dir / "adapters" / n for n in SHIPPED}
    assert config.routing.adapters == sorted(SHIPPED)


def test_lora_modules_are_resolved_under_the_model_folder(model_dir: Path, tmp_path: Path) -> None:
    modules = "manga_domain=adapters/manga_v3 jp_style=adapters/jp_style"
    # ADAPTERS_DIR is for the file's adapters only: LORA_MODULES paths are relative to MODEL_DIR.
    env = environment(model_dir, LORA_MODULES=modules, ADAPTERS_DIR=str(tmp_path / "elsewhere"))

    assert served_adapters(env, load_gateway_config(DEFAULT_CONFIG).routing) == {
        "manga_domain": model_dir / "adapters" / "manga_v3",
        "jp_style": model_dir / "adapters" / "jp_style",
    }


def test_an_adapter_under_a_new_name_is_reachable_by_name(model_dir: Path) -> None:
    modules = " ".join(f"{name}=adapters/{name}" for name in (*SHIPPED, "manga_v3"))
    config, adapters = effective_config(
        environment(model_dir, LORA_MODULES=modules), load_gateway_config(DEFAULT_CONFIG)
    )
    router = Router(config.routing)

    assert sorted(adapters) == sorted([*SHIPPED, "manga_v3"])
    assert router.resolve(ask(adapter="manga_v3")) == "manga_v3"
    assert router.resolve(ask(model="manga_v3")) == "manga_v3"
    assert router.resolve(ask(locale="ja-JP")) == "jp_style"  # the file's routes still apply


def test_every_start_up_problem_is_named_at_once(model_dir: Path) -> None:
    # LORA_MODULES serves manga_domain, a missing adapter and one of another rank; gateway.yaml routes to
    # jp_style and general_support, which are not served; the model's max_model_len is below the budget's limit.
    env = environment(
        model_dir,
        LORA_MODULES="manga_domain=adapters/manga_domain ghost=adapters/ghost odd=adapters/rank4",
        SM_VLLM_MAX_MODEL_LEN="512",
    )

    with pytest.raises(GatewayConfigError) as info:
        effective_config(env, load_gateway_config(DEFAULT_CONFIG))

    problems = info.value.problems
    assert problems[0].startswith("budget.max_tokens_limit (512) must be below the engine's max_model_len (512)")
    assert problems[1] == (
        "routing.routes[0] (intent order_status) leads to adapter 'general_support', which LORA_MODULES does not "
        "serve (served: base, ghost, manga_domain, odd)"
    )
    # shipping, refund, payment, cancellation, account, then the Japanese style route
    assert [p.split("'")[1] for p in problems[2:7]] == ["general_support"] * 5
    assert problems[7].startswith("routing.routes[6] (locale ja) leads to adapter 'jp_style', which LORA_MODULES")
    assert problems[8] == (
        f"adapter 'ghost': cannot read {model_dir}/adapters/ghost/adapter_config.json: No such file or directory"
    )
    assert problems[9].startswith("LoRA adapters must share rank and target modules")
    assert "odd: rank 4" in problems[9]
    assert len(problems) == 10


def test_a_default_route_to_an_adapter_not_served_is_refused(model_dir: Path) -> None:
    env = environment(model_dir, LORA_MODULES="")  # set but empty: no adapters at all

    with pytest.raises(GatewayConfigError) as info:
        effective_config(env, load_gateway_config(DEFAULT_CONFIG))

    assert info.value.problems[-1] == (
        "routing.default is adapter 'manga_domain', which LORA_MODULES does not serve (served: base)"
    )


def test_the_effective_knobs_are_the_engines_flags(model_dir: Path) -> None:
    env = environment(model_dir, SM_VLLM_MAX_NUM_SEQS="8", SM_VLLM_MAX_MODEL_LEN="4096")
    config, adapters = effective_config(env, load_gateway_config(DEFAULT_CONFIG))

    command = engine_command(
        model_dir,
        {name: info.path for name, info in adapters.items()},
        lora_rank=8,
        knobs=config.engine,
        host="127.0.0.1",
        port=8081,
        extra_args=["--max-num-seqs", "256", "--swap-space", "4"],
    )

    # The knobs come last: a flag repeated in supervisor.extra_args cannot win over the model's value.
    assert command[-8:] == [
        "--max-num-seqs",
        "256",
        "--swap-space",
        "4",
        "--max-num-seqs",
        "8",
        "--max-model-len",
        "4096",
    ]
    assert command.count("--max-model-len") == 1
    assert config.budget.max_model_len == 4096


@pytest.fixture
def gateway_logger() -> Iterator[None]:
    """Whatever a test does to the ``gateway`` logger is undone afterwards."""
    logger = logging.getLogger("gateway")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate


@pytest.mark.usefixtures("gateway_logger")
def test_serve_refuses_to_start_naming_every_problem(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("ENDPOINT_NAME", "VARIANT_NAME", "MODEL_VERSION", "LORA_MODULES", "ENGINE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SM_VLLM_MAX_NUM_SEQ", "8")
    monkeypatch.setenv("SM_VLLM_MAX_NUM_SEQS", "lots")
    log_to_stderr()  # as the entrypoint does, now that sys.stderr is capsys's

    assert main(["serve"]) == 1

    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "gateway: cannot start:"
    assert [line.split(" ")[3].rstrip(":") for line in lines[1:]] == [
        "ENDPOINT_NAME",
        "VARIANT_NAME",
        "MODEL_VERSION",
        "SM_VLLM_MAX_NUM_SEQ",
        "SM_VLLM_MAX_NUM_SEQS",
    ]
