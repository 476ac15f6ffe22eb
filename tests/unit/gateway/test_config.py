"""Gateway configuration: the shipped file loads, and wrong values fail at start-up with the field named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gateway.config import DEFAULT_CONFIG, Environment, GatewayConfigError, load_gateway_config
from gateway.protocol import ClientError, parse_invocation


def test_shipped_config_is_consistent() -> None:
    config = load_gateway_config(DEFAULT_CONFIG)
    assert config.budget.max_tokens_limit < config.budget.max_model_len
    assert config.drain.window_s < 30  # SageMaker's SIGKILL follows SIGTERM by ~30 s
    assert config.breaker.request_deadline_s < 60  # SageMaker's invocation limit
    assert set(config.routing.adapters) == {"manga_domain", "general_support", "jp_style"}


def with_change(tmp_path: Path, section: str, key: str, value: object) -> Path:
    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    data[section][key] = value
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        ("budget", "history_low_tokens", 5000, "history_low_tokens must be below"),
        ("budget", "max_tokens_limit", 4096, "max_tokens_limit must be below budget.max_model_len"),
        ("budget", "truncation_marker", "[cut]", "must contain '{dropped}'"),
        ("routing", "default", "shonen_v9", "not in routing.adapters"),
        ("drain", "window_s", 45, "drain.window_s"),
        ("breaker", "request_deadline_s", 90, "breaker.request_deadline_s"),
        ("budget", "surprise", 1, "budget.surprise"),
    ],
)
def test_bad_values_fail_with_the_field_named(
    tmp_path: Path, section: str, key: str, value: object, message: str
) -> None:
    with pytest.raises(GatewayConfigError, match=message.replace("[", r"\[").replace("{", r"\{")):
        load_gateway_config(with_change(tmp_path, section, key, value))


def test_missing_or_broken_file(tmp_path: Path) -> None:
    with pytest.raises(GatewayConfigError, match="cannot read gateway config"):
        load_gateway_config(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("budget: [unclosed")
    with pytest.raises(GatewayConfigError, match="not valid YAML"):
        load_gateway_config(tmp_path / "bad.yaml")


def test_environment() -> None:
    env = Environment.from_env(
        {"MODEL_DIR": "/opt/ml/model", "SAGEMAKER_ENDPOINT_NAME": "manga-chat", "SAGEMAKER_BIND_TO_PORT": "8080"}
    )
    assert (env.endpoint_name, env.variant_name, env.port) == ("manga-chat", "local", 8080)
    assert str(env.resolved_adapters_dir) == "/opt/ml/model/adapters"
    assert env.engine_url is None
    with pytest.raises(GatewayConfigError, match="port"):
        Environment.from_env({"PORT": "eighty"})


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
    with pytest.raises(ClientError) as info:
        parse_invocation(raw)
    assert info.value.status == 400
    assert info.value.code == code
    assert says in info.value.message


def test_openai_sampling_fields_pass_through() -> None:
    parsed = parse_invocation(b'{"messages": [{"role": "user", "content": "x"}], "temperature": 0.2, "seed": 7}')
    assert parsed.passthrough == {"temperature": 0.2, "seed": 7}
