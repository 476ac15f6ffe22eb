"""The model artifact gate on the real generated tiny model and its adapters, laid out as a model artifact."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from devtools.tiny_model import LORA_RANK, ensure_tiny_model
from fleetops.promotion.artifact import ArtifactCheck
from fleetops.promotion.artifact_files import check_folder

REPO = Path(__file__).resolve().parents[3]
ADAPTER_NAMES = ("general_support", "jp_style", "manga_domain")


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    """What SageMaker extracts into /opt/ml/model: the base model's files, and ``adapters/<name>/``."""
    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    root = tmp_path / "artifact"
    shutil.copytree(tiny.model_dir, root)
    for name, folder in tiny.adapters.items():
        shutil.copytree(folder, root / "adapters" / name)
    return root


def _edit_json(path: Path, **changes: object) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def _problems(check: ArtifactCheck) -> str:
    assert not check.ok
    return "\n".join(check.problems)


def test_the_generated_model_and_adapters_pass_with_the_checksums_hashlib_computes(artifact: Path) -> None:
    check = check_folder(artifact)

    assert check.ok, check.problems
    assert check.problems == ()
    expected = {
        path.relative_to(artifact).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in artifact.rglob("*")
        if path.is_file() and "adapters" not in path.relative_to(artifact).parts
    }
    assert check.base.files == expected
    assert {"config.json", "tokenizer.json", "model.safetensors"} <= set(expected)
    assert sorted(check.adapters) == [f"adapters/{name}" for name in ADAPTER_NAMES]
    jp_style = artifact / "adapters" / "jp_style" / "adapter_model.safetensors"
    assert (
        check.adapters["adapters/jp_style"].files["adapter_model.safetensors"]
        == hashlib.sha256(jp_style.read_bytes()).hexdigest()
    )


def test_the_digest_is_the_sha256sum_listing_of_the_part(artifact: Path) -> None:
    check = check_folder(artifact)

    files = check.adapters["adapters/jp_style"].files
    listing = "".join(f"{files[path]}  {path}\n" for path in sorted(files))
    assert check.adapters["adapters/jp_style"].digest == hashlib.sha256(listing.encode()).hexdigest()
    assert check.adapters["adapters/jp_style"].digest != check.adapters["adapters/manga_domain"].digest


def test_a_tampered_file_changes_its_checksum_and_nothing_else(artifact: Path) -> None:
    before = check_folder(artifact)
    config = artifact / "adapters" / "jp_style" / "adapter_config.json"
    config.write_text(config.read_text() + " ")

    after = check_folder(artifact)

    assert after.ok
    old, new = before.adapters["adapters/jp_style"].files, after.adapters["adapters/jp_style"].files
    changed = {path for path, sha in new.items() if old[path] != sha}
    assert changed == {"adapter_config.json"}
    assert after.adapters["adapters/jp_style"].digest != before.adapters["adapters/jp_style"].digest
    assert after.base == before.base


def test_a_truncated_tokenizer_is_refused_naming_the_file(artifact: Path) -> None:
    tokenizer = artifact / "tokenizer.json"
    text = tokenizer.read_text()
    tokenizer.write_text(text[: len(text) // 2])

    problems = _problems(check_folder(artifact))

    assert "tokenizer.json: not valid JSON at line" in problems


def test_a_tokenizer_without_its_model_is_refused(artifact: Path) -> None:
    _edit_json(artifact / "tokenizer.json", model={"vocab": {}})

    assert "tokenizer.json: no model with a type" in _problems(check_folder(artifact))


def test_a_tokenizer_larger_than_the_model_vocabulary_is_refused(artifact: Path) -> None:
    # The broken export devtools.tiny_model.write_truncated_vocab_model makes: it kills the engine on a prompt.
    _edit_json(artifact / "config.json", vocab_size=512)

    problems = _problems(check_folder(artifact))

    assert "is not below config.json's vocab_size 512" in problems
    assert "config.json: vocab_size 512 but the weights' embed_tokens.weight has" in problems


def test_a_pickle_weight_file_is_refused_wherever_it_is(artifact: Path) -> None:
    (artifact / "pytorch_model.bin").write_bytes(b"\x80\x04pickle")
    (artifact / "adapters" / "jp_style" / "adapter_model.pt").write_bytes(b"\x80\x04pickle")

    problems = _problems(check_folder(artifact))

    assert "pytorch_model.bin: .bin files are refused: pickle-based formats can run code" in problems
    assert "adapters/jp_style/adapter_model.pt: .pt files are refused" in problems


def test_a_missing_config_is_refused(artifact: Path) -> None:
    (artifact / "config.json").unlink()

    assert "config.json: missing" in _problems(check_folder(artifact))


def test_base_weights_in_another_format_only_are_refused(artifact: Path) -> None:
    (artifact / "model.safetensors").rename(artifact / "model.gguf")

    assert "no *.safetensors weights" in _problems(check_folder(artifact))


def test_truncated_base_weights_are_refused(artifact: Path) -> None:
    weights = artifact / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])

    assert "model.safetensors: not a readable safetensors file: tensor" in _problems(check_folder(artifact))


def test_an_adapter_above_the_rank_limit_is_refused_naming_it(artifact: Path) -> None:
    _edit_json(artifact / "adapters" / "jp_style" / "adapter_config.json", r=128)

    problems = _problems(check_folder(artifact, max_lora_rank=64))

    assert "adapters/jp_style/adapter_config.json: rank 128 above max_lora_rank 64" in problems
    assert "manga_domain/adapter_config.json" not in problems  # only the adapter at fault is named in its own line


def test_the_rank_limit_is_the_callers(artifact: Path) -> None:
    assert check_folder(artifact, max_lora_rank=LORA_RANK).ok
    assert f"rank {LORA_RANK} above max_lora_rank 4" in _problems(check_folder(artifact, max_lora_rank=4))


def test_an_adapter_whose_weights_disagree_with_its_rank_is_refused(artifact: Path) -> None:
    for name in ADAPTER_NAMES:  # all of them, so the shared-rank check stays quiet
        _edit_json(artifact / "adapters" / name / "adapter_config.json", r=16)

    problems = _problems(check_folder(artifact))

    assert "adapters/jp_style/adapter_model.safetensors: " in problems
    assert f"has rank {LORA_RANK}, the config says 16" in problems


def test_an_adapter_targeting_a_module_the_base_lacks_is_refused_naming_it(artifact: Path) -> None:
    _edit_json(artifact / "adapters" / "manga_domain" / "adapter_config.json", target_modules=["q_proj", "qkv_proj"])

    problems = _problems(check_folder(artifact))

    assert "adapters/manga_domain/adapter_config.json: target module 'qkv_proj' is not in the base model's weights" in (
        problems
    )
    assert "'q_proj' is not in" not in problems


def test_adapters_that_cannot_be_served_together_are_refused(artifact: Path) -> None:
    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    assert tiny.mismatched_adapter is not None
    shutil.copytree(tiny.mismatched_adapter, artifact / "adapters" / "mismatched_rank")

    problems = _problems(check_folder(artifact))

    assert "adapters must share rank and target modules to be served together" in problems
    assert "adapters/mismatched_rank: rank 4, ['k_proj', 'o_proj']" in problems


def test_an_adapter_for_another_base_model_is_refused(artifact: Path) -> None:
    _edit_json(artifact / "adapters" / "jp_style" / "adapter_config.json", base_model_name_or_path="org/other-model")

    assert "adapters name different base models" in _problems(check_folder(artifact))
    named = _problems(check_folder(artifact, base_model="/anywhere/model"))
    assert "adapters/jp_style/adapter_config.json: base_model_name_or_path 'org/other-model' is not the base" in named
    assert "manga_domain" not in named


def test_a_link_is_refused_and_not_followed(artifact: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    (artifact / "extra.json").symlink_to(outside)

    check = check_folder(artifact)

    assert "extra.json: a link, not a regular file" in _problems(check)
    assert "extra.json" not in check.base.files


def test_a_special_token_the_tokenizer_lacks_is_refused(artifact: Path) -> None:
    _edit_json(artifact / "tokenizer_config.json", eos_token="<|eot_id|>")

    assert "tokenizer_config.json: eos_token '<|eot_id|>' is not a token of tokenizer.json" in _problems(
        check_folder(artifact)
    )


def test_an_adapter_without_its_weights_is_refused_naming_it(artifact: Path) -> None:
    (artifact / "adapters" / "general_support" / "adapter_model.safetensors").unlink()

    problems = _problems(check_folder(artifact))

    assert "adapters/general_support/adapter_model.safetensors: missing" in problems
