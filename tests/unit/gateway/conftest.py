"""Pure gateway parts: a real tokenizer trained in a temp folder (tokenizers only, no torch, no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.tiny_model import write_tokenizer
from gateway.config import DEFAULT_CONFIG, GatewayConfig, load_gateway_config
from gateway.prompt import PromptBuilder
from gateway.tokens import TokenCounter


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tokenizer")
    write_tokenizer(folder)
    return folder


@pytest.fixture(scope="session")
def counter(tokenizer_dir: Path) -> TokenCounter:
    return TokenCounter(tokenizer_dir)


@pytest.fixture(scope="session")
def config() -> GatewayConfig:
    return load_gateway_config(DEFAULT_CONFIG)


@pytest.fixture
def builder(counter: TokenCounter, config: GatewayConfig) -> PromptBuilder:
    return PromptBuilder(counter, config.system_prompt, config.budget)
