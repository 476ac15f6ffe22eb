"""Gateway configuration: the shipped file loads, the model's contract is read from the environment, the
model's engine knobs go over the file's, and wrong values fail at start-up with every problem named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from fleetops.model_contract import EngineKnobs
from gateway.config import DEFAULT_CONFIG, Environment, GatewayConfigError, load_gateway_config
from gateway.errors import GatewayError
from gateway.protocol import parse_invocation

CONTRACT = {"ENDPOINT_NAME": "manga-chat", "VARIANT_NAME": "canary", "MODEL_VERSION": "llama-q4-v7"}


def test_shipped_config_is_consistent() -> None:
    config = load_gateway_config(DEFAULT_CONFIG)
    assert config.budget.max_tokens_limit < config.budget.max_model_len == config.engine.max_model_len
    assert config.drain.window_s < 30  # SageMaker's SIGKILL follows SIGTERM by ~30 s
    assert config.containment.request_deadline_s < 60  # SageMaker's invocation limit
    assert set(config.routing.adapters) == {"manga_domain", "general_support", "jp_style"}
    assert config.server.max_body_bytes == 1024 * 1024  # a chat request needs far less; refused before parsing
    assert config.limits.n == 1
    assert config.limits.min_tokens < config.budget.max_tokens_limit


def with_change(tmp_path: Path, section: str, key: str, value: object) -> Path:
    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    if value is None:
        del data[section][key]
    else:
        data[section][key] = value
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        ("budget", "history_low_tokens", 5000, "history_low_tokens must be below"),
        ("budget", "max_tokens_limit", 8192, "max_tokens_limit (8192) must be below the engine's max_model_len (4096)"),
        (
            "budget",
            "max_context_tokens",
            3000,
            "budget categories (system 400 + retrieval 3000 + history 1200 + summary 400 + generation 512 = 5512) "
            "must fit the engine's max_model_len (4096)",
        ),
        ("summary", "max_tokens", 400, "summary.max_tokens (400) must be below budget.summary_tokens (400)"),
        ("summary", "mode", "abstractive", "summary.mode: Input should be 'model', 'extractive' or 'off'"),
        ("summary", "timeout_s", 0, "summary.timeout_s: Input should be greater than 0"),
        ("budget", "max_model_len", 4096, "budget.max_model_len moved to engine.max_model_len"),
        ("engine", "max_model_len", None, "engine.max_model_len is required"),
        ("engine", "max_num_seq", 8, "engine.max_num_seq: Extra inputs are not permitted"),
        ("engine", "max_num_seqs", "lots", "engine.max_num_seqs: Input should be a valid integer"),
        ("supervisor", "extra_args", ["--max-model-len=4096"], "must not set --max-model-len"),
        ("budget", "truncation_marker", "[cut]", "must contain '{dropped}'"),
        ("routing", "default", "shonen_v9", "not in routing.adapters"),
        ("drain", "window_s", 45, "drain.window_s"),
        ("breaker", "request_deadline_s", 90, "breaker.request_deadline_s"),
        ("budget", "surprise", 1, "budget.surprise"),
        ("server", "max_body_bytes", 7 * 1024 * 1024, "server.max_body_bytes: Input should be less than or equal"),
        ("limits", "n", 0, "limits.n: Input should be greater than or equal to 1"),
        ("limits", "best_of", 2, "limits.best_of: Extra inputs are not permitted"),
    ],
)
def test_bad_values_fail_with_the_field_named(
    tmp_path: Path, section: str, key: str, value: object, message: str
) -> None:
    with pytest.raises(GatewayConfigError, match=re.escape(message)):
        load_gateway_config(with_change(tmp_path, section, key, value))


def test_every_problem_in_the_file_is_named(tmp_path: Path) -> None:
    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    data["drain"]["window_s"] = 45
    data["engine"]["max_num_seq"] = 8
    (path := tmp_path / "gateway.yaml").write_text(yaml.safe_dump(data))

    with pytest.raises(GatewayConfigError) as info:
        load_gateway_config(path)

    assert [p.split(": ", 1)[1].split(":")[0] for p in info.value.problems] == ["engine.max_num_seq", "drain.window_s"]


def test_missing_or_broken_file(tmp_path: Path) -> None:
    with pytest.raises(GatewayConfigError, match="cannot read gateway config"):
        load_gateway_config(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("budget: [unclosed")
    with pytest.raises(GatewayConfigError, match="not valid YAML"):
        load_gateway_config(tmp_path / "bad.yaml")


def test_environment_reads_the_contract_and_the_deployment() -> None:
    env = Environment.from_env(
        {**CONTRACT, "MODEL_DIR": "/opt/ml/model", "SAGEMAKER_BIND_TO_PORT": "8080", "SM_VLLM_MAX_NUM_SEQS": "64"}
    )

    assert (env.endpoint_name, env.variant_name, env.model_version) == ("manga-chat", "canary", "llama-q4-v7")
    assert env.port == 8080
    assert env.engine == EngineKnobs(max_num_seqs=64)
    assert env.contract.adapters is None  # no LORA_MODULES: gateway.yaml's adapters
    assert str(env.resolved_adapters_dir) == "/opt/ml/model/adapters"
    assert env.engine_url is None


def test_without_the_contract_nothing_defaults() -> None:
    # The old names and the old silent defaults ("local", "dev") would put wrong dimensions on every metric.
    old_names = {"SAGEMAKER_ENDPOINT_NAME": "manga-chat", "SAGEMAKER_VARIANT_NAME": "canary", "BACKEND_VERSION": "v7"}

    with pytest.raises(GatewayConfigError) as info:
        Environment.from_env(old_names)

    assert [p.split(" ")[0] for p in info.value.problems] == ["ENDPOINT_NAME", "VARIANT_NAME", "MODEL_VERSION"]
    assert "the rollout sets it on every model it creates" in info.value.problems[0]


def test_a_malformed_name_is_named_beside_a_missing_one() -> None:
    with pytest.raises(GatewayConfigError) as info:
        Environment.from_env({"ENDPOINT_NAME": "manga chat", "MODEL_VERSION": "v7"})

    assert [p.split(" ")[0].rstrip(":") for p in info.value.problems] == ["VARIANT_NAME", "ENDPOINT_NAME"]
    assert "String should match pattern" in info.value.problems[1]


def test_every_problem_of_the_environment_is_named_at_once() -> None:
    env = {
        "VARIANT_NAME": "canary",
        "MODEL_VERSION": "v7",
        "LORA_MODULES": "jp_style=../elsewhere manga",
        "SM_VLLM_MAX_NUM_SEQ": "8",
        "SM_VLLM_MAX_NUM_SEQS": "lots",
        "PORT": "eighty",
        "METRICS_INTERVAL_S": "0",
    }

    with pytest.raises(GatewayConfigError) as info:
        Environment.from_env(env)

    named = [p.split(":")[0].split(" ")[0] for p in info.value.problems]
    assert named == [
        "ENDPOINT_NAME",
        "LORA_MODULES",  # 'manga' is not name=path
        "LORA_MODULES",  # ../elsewhere leaves the model folder
        "SM_VLLM_MAX_NUM_SEQ",
        "SM_VLLM_MAX_NUM_SEQS",
        "PORT",
        "METRICS_INTERVAL_S",
    ]
    assert "SM_VLLM_MAX_NUM_SEQ: unknown engine knob (known: SM_VLLM_MAX_NUM_SEQS, " in str(info.value)
    assert "SM_VLLM_MAX_NUM_SEQS: Input should be a valid integer" in str(info.value)


def test_model_knobs_go_over_the_file() -> None:
    config = load_gateway_config(DEFAULT_CONFIG)
    env = Environment.from_env({**CONTRACT, "SM_VLLM_MAX_NUM_SEQS": "8", "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.85"})

    effective = config.for_model(env.engine)

    # The file's max_model_len stays (the model does not set it); the model's knobs are added.
    assert effective.engine == EngineKnobs(max_model_len=4096, max_num_seqs=8, gpu_memory_utilization=0.85)
    assert effective.budget == config.budget
    assert config.for_model(EngineKnobs()) == config


def test_the_budget_follows_the_effective_max_model_len() -> None:
    config = load_gateway_config(DEFAULT_CONFIG)

    longer = config.for_model(Environment.from_env({**CONTRACT, "SM_VLLM_MAX_MODEL_LEN": "8192"}).engine)
    assert longer.engine.max_model_len == longer.budget.max_model_len == 8192

    with pytest.raises(GatewayConfigError) as info:
        config.for_model(Environment.from_env({**CONTRACT, "SM_VLLM_MAX_MODEL_LEN": "512"}).engine)
    assert info.value.problems == [
        "budget.max_tokens_limit (512) must be below the engine's max_model_len (512) "
        "(max_model_len from SM_VLLM_MAX_MODEL_LEN)"
    ]


@pytest.mark.parametrize(
    ("raw", "code", "says"),
    [
        (b"{", "invalid_json", "not valid JSON"),
        (b"[]", "invalid_request", "(body)"),
        (b'{"messages": "hi"}', "invalid_request", "messages: Input should be a valid array"),
        (b'{"messages": []}', "invalid_request", "messages: List should have at least 1 item"),
        (b'{"messages": [{"role": "user"}]}', "invalid_request", "messages.0.content: Field required"),
        (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}', "invalid_request", "max_tokens"),
    ],
)
def test_bad_bodies_say_what_is_wrong(raw: bytes, code: str, says: str) -> None:
    with pytest.raises(GatewayError) as info:
        parse_invocation(raw)
    assert info.value.code.status == 400
    assert info.value.code == code
    assert says in info.value.message


def test_openai_sampling_fields_pass_through() -> None:
    parsed = parse_invocation(b'{"messages": [{"role": "user", "content": "x"}], "temperature": 0.2, "seed": 7}')
    assert parsed.passthrough == {"temperature": 0.2, "seed": 7}
