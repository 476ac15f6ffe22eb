"""Artifact rules of Bedrock Custom Model Import, applied before any job is started (pure, no network)."""

from __future__ import annotations

import json

import pytest

from fleetops.bedrock import rules
from fleetops.bedrock.models import ArtifactObject, ImportRequest, ImportRequestError, parse_request
from fleetops.bedrock.validation import (
    ArtifactValidationError,
    check_artifacts,
    client_token,
    inspect_artifacts,
    poll_schedule,
)
from tests.conftest import load_event

ROOT = "s3://manga-llm-fleet-artifacts/bedrock-imports/"
LLAMA = json.dumps({"architectures": ["LlamaForCausalLM"]})
GOOD = [
    ArtifactObject(name="config.json", size=700),
    ArtifactObject(name="tokenizer_config.json", size=900),
    ArtifactObject(name="tokenizer.json", size=9_000_000),
    ArtifactObject(name="model-00001-of-00002.safetensors", size=5 * rules.GIB),
    ArtifactObject(name="model-00002-of-00002.safetensors", size=3 * rules.GIB),
]


def sample() -> ImportRequest:
    return parse_request(load_event("bedrock_validate_artifacts"))


def problems_of(objects: list[ArtifactObject], config: str | None = LLAMA) -> list[str]:
    with pytest.raises(ArtifactValidationError) as caught:
        check_artifacts(sample(), objects, config, allowed_root=ROOT)
    return caught.value.problems


def without(*names: str) -> list[ArtifactObject]:
    return [o for o in GOOD if o.name not in names]


def test_a_complete_llama_folder_gives_a_deterministic_plan() -> None:
    plan = check_artifacts(sample(), GOOD, LLAMA, allowed_root=ROOT)

    assert (plan.architecture, plan.family, plan.converse_supported) == ("LlamaForCausalLM", "Llama", True)
    assert plan.job_name == "fleetops-manga-chat-2026-11-21"
    assert plan.imported_model_name == "manga-chat-2026-11-21"  # dots are not allowed in Bedrock model names
    assert plan.total_bytes == sum(o.size for o in GOOD) and plan.weight_files == 2
    assert plan.client_request_token == check_artifacts(sample(), GOOD, LLAMA, allowed_root=ROOT).client_request_token
    assert plan.poll_waits[:4] == (60, 120, 240, 300) and len(plan.poll_waits) == 60
    assert plan.warnings == ()


def test_every_problem_is_listed_at_once() -> None:
    found = problems_of(
        [ArtifactObject(name="config.json", size=10), ArtifactObject(name="pytorch_model.bin", size=10)],
        json.dumps({"architectures": ["BertForMaskedLM"]}),
    )

    assert found == [
        "tokenizer_config.json is missing",
        "no tokenizer: need tokenizer.json or tokenizer.model",
        "no *.safetensors weights (Hugging Face safetensors format is required)",
        "architecture 'BertForMaskedLM' is not supported by Custom Model Import (supported: "
        + ", ".join(sorted(rules.SUPPORTED_ARCHITECTURES))
        + ")",
    ]


def test_the_error_message_names_the_folder_and_numbers_the_problems() -> None:
    with pytest.raises(ArtifactValidationError) as caught:
        check_artifacts(sample(), without("tokenizer.json", "tokenizer_config.json"), LLAMA, allowed_root=ROOT)
    assert str(caught.value) == (
        f"2 problem(s) with {sample().artifacts_s3_uri}: (1) tokenizer_config.json is missing; "
        "(2) no tokenizer: need tokenizer.json or tokenizer.model"
    )


def test_a_sentencepiece_tokenizer_is_enough() -> None:
    objects = [*without("tokenizer.json"), ArtifactObject(name="tokenizer.model", size=500_000)]
    assert check_artifacts(sample(), objects, LLAMA, allowed_root=ROOT).architecture == "LlamaForCausalLM"


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        (None, "config.json is missing"),
        ("{not json", "config.json is not valid JSON (Expecting property name enclosed in double quotes at line 1)"),
        ('{"model_type": "llama"}', 'config.json has no "architectures" list naming the model class'),
        ('{"architectures": []}', 'config.json has no "architectures" list naming the model class'),
    ],
)
def test_config_problems(config: str | None, problem: str) -> None:
    objects = GOOD if config is not None else without("config.json")
    assert problem in problems_of(objects, config)


def test_size_limit_depends_on_the_architecture() -> None:
    huge = [*GOOD, ArtifactObject(name="model-00003-of-00003.safetensors", size=195 * rules.GIB)]
    assert problems_of(huge) == ["total size 203.0 GiB exceeds the 200 GiB import limit"]
    vision = json.dumps({"architectures": ["MllamaForConditionalGeneration"]})
    big = [*GOOD, ArtifactObject(name="model-00003-of-00003.safetensors", size=95 * rules.GIB)]
    assert problems_of(big, vision) == ["total size 103.0 GiB exceeds the 100 GiB import limit"]


def test_empty_weight_files_are_a_truncated_upload() -> None:
    objects = [
        *without("model-00002-of-00002.safetensors"),
        ArtifactObject(name="model-00002-of-00002.safetensors", size=0),
    ]
    assert problems_of(objects) == ["model-00002-of-00002.safetensors is empty (0 bytes)"]


def test_files_in_subfolders_do_not_count() -> None:
    nested = [ArtifactObject(name=f"checkpoint-500/{o.name}", size=o.size) for o in GOOD]
    assert "config.json is missing" in problems_of(nested)


def test_artifacts_outside_the_allowed_root_are_refused_without_other_checks() -> None:
    request = sample().model_copy(update={"artifacts_s3_uri": "s3://elsewhere/model/"})
    with pytest.raises(ArtifactValidationError) as caught:
        check_artifacts(request, GOOD, LLAMA, allowed_root=ROOT)
    assert caught.value.problems == [f"artifacts must be under {ROOT}, not s3://elsewhere/model/"]


def test_no_objects() -> None:
    assert problems_of([]) == [f"no objects under {sample().artifacts_s3_uri}"]


def test_warnings_for_ignored_weights_and_no_converse() -> None:
    objects = [*GOOD, ArtifactObject(name="pytorch_model.bin", size=10)]
    qwen = json.dumps({"architectures": ["Qwen2ForCausalLM"]})
    plan = check_artifacts(sample(), objects, qwen, allowed_root=ROOT)
    assert plan.converse_supported is False
    assert plan.warnings == (
        "pytorch_model.bin is ignored: only *.safetensors weights are imported",
        "Qwen2 / Qwen2.5 models do not support Converse: the smoke test will be skipped",
    )


def test_client_token_changes_with_the_request_and_fits_the_api_pattern() -> None:
    other = sample().model_copy(update={"artifacts_s3_uri": ROOT + "manga-chat/2026-11-22/"})
    token = client_token(sample())
    assert token != client_token(other)
    assert len(token) == 48 and token.isalnum()


def test_poll_schedule_doubles_and_caps() -> None:
    assert poll_schedule(60, 300, 6) == (60, 120, 240, 300, 300, 300)
    assert poll_schedule(0, 0, 3) == (0, 0, 0)


class FakeStore:
    """In-memory artifact store (the S3 adapter is tested against botocore's Stubber separately)."""

    def __init__(self, files: dict[str, str]):
        self.files = files
        self.reads: list[str] = []

    def list_objects(self, bucket: str, prefix: str) -> list[ArtifactObject]:
        return [
            ArtifactObject(name=k.removeprefix(prefix), size=len(v))
            for k, v in self.files.items()
            if k.startswith(prefix)
        ]

    def read_text(self, bucket: str, key: str) -> str:
        self.reads.append(key)
        return self.files[key]


def test_inspect_reads_config_json_from_the_prefix() -> None:
    prefix = sample().prefix
    store = FakeStore({prefix + o.name: ("x" * 10 if o.name != "config.json" else LLAMA) for o in GOOD})
    plan = inspect_artifacts(sample(), store, allowed_root=ROOT)
    assert plan.architecture == "LlamaForCausalLM" and store.reads == [prefix + "config.json"]


def test_inspect_never_reads_outside_the_root() -> None:
    store = FakeStore({"model/config.json": LLAMA})
    request = sample().model_copy(update={"artifacts_s3_uri": "s3://elsewhere/model/"})
    with pytest.raises(ArtifactValidationError):
        inspect_artifacts(request, store, allowed_root=ROOT)
    assert store.reads == []


def test_inspect_refuses_a_huge_config_json() -> None:
    prefix = sample().prefix
    store = FakeStore({prefix + "config.json": " " * (rules.MAX_CONFIG_BYTES + 1)})
    with pytest.raises(ArtifactValidationError, match=r"config\.json is larger than 1 MiB"):
        inspect_artifacts(sample(), store, allowed_root=ROOT)
    assert store.reads == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"import_id": "has space"}, "import_id: String should match pattern"),
        ({"artifacts_s3_uri": "https://bucket/x"}, "artifacts_s3_uri: Value error, must look like s3://bucket/prefix/"),
        ({"prompts": []}, "prompts: Tuple should have at least 1 item"),
        ({"prompts": ["  "]}, "prompts: Value error, prompts must not be blank"),
        ({"max_polls": 0}, "max_polls: Input should be greater than or equal to 1"),
        ({"surprise": 1}, "surprise: Extra inputs are not permitted"),
    ],
)
def test_bad_requests_say_what_is_wrong(change: dict[str, object], message: str) -> None:
    with pytest.raises(ImportRequestError, match=r"^bad import request: ") as caught:
        parse_request(load_event("bedrock_validate_artifacts") | change)
    assert message in str(caught.value)


def test_the_s3_uri_is_normalised_to_a_folder() -> None:
    request = parse_request(load_event("bedrock_validate_artifacts") | {"artifacts_s3_uri": "s3://bkt/a/b"})
    assert (request.artifacts_s3_uri, request.bucket, request.prefix) == ("s3://bkt/a/b/", "bkt", "a/b/")
