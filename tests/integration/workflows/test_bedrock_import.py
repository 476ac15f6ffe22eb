"""The Bedrock import workflow executed from ``statemachines/bedrock_import.asl.json`` on the moto server.

Emulated by this project, not by moto (see ``devtools/emulator_extensions/bedrock.py``): Bedrock Custom
Model Import (CreateModelImportJob, GetModelImportJob, ListModelImportJobs, GetImportedModel, with the
InProgress -> Completed | Failed transitions of the API reference) and bedrock-runtime Converse for
imported models. Lambda tasks run the project's real handlers (``devtools/lambda_dispatch.py``).
Everything else (Step Functions, S3, DynamoDB, SNS, SQS) is moto over HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from devtools import bedrock_workflow as wf
from devtools.emulator_extensions import bedrock as emulated_bedrock
from tests.conftest import load_event


@pytest.fixture
def workflow(monkeypatch: pytest.MonkeyPatch) -> Iterator[wf.ImportWorkflow]:
    deployed = wf.deploy()
    for key, value in deployed.environment.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(emulated_bedrock.behaviour, "polls_in_progress", 2)
    with wf.handlers():
        yield deployed


def request(**changes: Any) -> dict[str, Any]:
    """The sample event, polling without real waits (the schedule stays bounded by max_polls)."""
    return load_event("bedrock_validate_artifacts") | {"poll_initial_seconds": 0, "poll_max_seconds": 0} | changes


def import_jobs() -> list[dict[str, Any]]:
    return [dict(j) for j in boto3.client("bedrock").list_model_import_jobs()["modelImportJobSummaries"]]


def registry_items(workflow: wf.ImportWorkflow) -> list[dict[str, Any]]:
    return list(boto3.client("dynamodb").scan(TableName=workflow.registry_table)["Items"])


def test_valid_artifacts_are_imported_smoke_tested_and_registered(workflow: wf.ImportWorkflow) -> None:
    uri = wf.upload_artifacts("manga-chat/2026-11-21/", wf.LLAMA_FILES)
    assert uri == load_event("bedrock_validate_artifacts")["artifacts_s3_uri"]

    result = wf.run(workflow, request())

    assert result["status"] == "SUCCEEDED", result
    output = __import__("json").loads(result["output"])
    jobs = import_jobs()
    assert len(jobs) == 1 and jobs[0]["status"] == "Completed"
    assert output["imported_model_arn"] == jobs[0]["importedModelArn"]
    assert (output["model_name"], output["version"], output["smoke_test"]) == ("manga-chat", "2026.11.21", "passed")
    model = boto3.client("bedrock").get_imported_model(modelIdentifier=output["imported_model_arn"])
    assert (model["modelName"], model["modelArchitecture"]) == ("manga-chat-2026-11-21", "LlamaForCausalLM")
    # The job was InProgress twice before it completed: the poll loop really looped.
    assert wf.state_history(result["executionArn"]).count("GetImportJob") == 3
    [item] = registry_items(workflow)
    assert item["model_name"]["S"] == "manga-chat" and item["version"]["S"] == "2026.11.21"
    assert item["imported_model_arn"]["S"] == output["imported_model_arn"]
    assert (item["kind"]["S"], item["smoke_test"]["S"], item["architecture"]["S"]) == (
        "bedrock",
        "passed",
        "LlamaForCausalLM",
    )
    [note] = wf.notifications(workflow)
    assert note["Subject"] == "Bedrock import completed" and output["imported_model_arn"] in note["Message"]


def test_missing_tokenizer_fails_before_any_import_job_and_lists_every_problem(workflow: wf.ImportWorkflow) -> None:
    files = {k: v for k, v in wf.LLAMA_FILES.items() if not k.startswith("tokenizer")}
    files["config.json"] = b'{"architectures": ["BertForMaskedLM"]}'
    wf.upload_artifacts("manga-chat/2026-11-21/", files)

    result = wf.run(workflow, request())

    assert result["status"] == "FAILED"
    assert result["error"] == "ArtifactValidationError"
    # What the operator reads: every problem at once, not the first one.
    assert "tokenizer_config.json is missing" in result["cause"]
    assert "no tokenizer: need tokenizer.json or tokenizer.model" in result["cause"]
    assert "architecture 'BertForMaskedLM' is not supported" in result["cause"]
    assert import_jobs() == []  # nothing was spent
    assert registry_items(workflow) == []
    [note] = wf.notifications(workflow)
    assert note["Subject"] == "Bedrock import FAILED" and "tokenizer_config.json is missing" in note["Message"]


def test_failed_import_job_surfaces_bedrocks_failure_message(workflow: wf.ImportWorkflow) -> None:
    wf.upload_artifacts("manga-chat/2026-11-21/", wf.LLAMA_FILES)
    message = "The model's hidden_size is not supported for LlamaForCausalLM."
    emulated_bedrock.script_import_failure("fleetops-manga-chat-2026-11-21", message)

    result = wf.run(workflow, request())

    assert (result["status"], result["error"], result["cause"]) == ("FAILED", "ImportJobFailed", message)
    assert [j["status"] for j in import_jobs()] == ["Failed"]
    assert registry_items(workflow) == []
    assert message in wf.notifications(workflow)[0]["Message"]


def test_bad_input_fails_fast_and_touches_nothing(workflow: wf.ImportWorkflow) -> None:
    result = wf.run(workflow, request(artifacts_s3_uri="https://example.com/model", import_id="bad input!"), name="bad")

    assert (result["status"], result["error"]) == ("FAILED", "ImportRequestError")
    assert "import_id: String should match pattern" in result["cause"]
    assert "artifacts_s3_uri: Value error, must look like s3://bucket/prefix/" in result["cause"]
    assert import_jobs() == []


def test_artifacts_outside_the_project_prefix_are_refused(workflow: wf.ImportWorkflow) -> None:
    result = wf.run(workflow, request(artifacts_s3_uri="s3://someone-elses-bucket/model/"))

    assert (result["status"], result["error"]) == ("FAILED", "ArtifactValidationError")
    assert f"artifacts must be under {wf.ARTIFACT_ROOT}" in result["cause"]
    assert import_jobs() == []


def test_a_rerun_reuses_the_job_and_registers_once(workflow: wf.ImportWorkflow) -> None:
    wf.upload_artifacts("manga-chat/2026-11-21/", wf.LLAMA_FILES)
    first = wf.run(workflow, request(), name="first")
    second = wf.run(workflow, request(), name="second")  # e.g. an operator retried after a timeout

    assert (first["status"], second["status"]) == ("SUCCEEDED", "SUCCEEDED")
    assert len(import_jobs()) == 1  # same job name and client token: Bedrock returns the same job
    assert len(registry_items(workflow)) == 1


def test_bad_smoke_answers_stop_the_registration(workflow: wf.ImportWorkflow) -> None:
    wf.upload_artifacts("manga-chat/2026-11-21/", wf.LLAMA_FILES)
    emulated_bedrock.script_converse_reply("manga-chat-2026-11-21", text="", stop_reason="end_turn")

    result = wf.run(workflow, request())

    assert (result["status"], result["error"]) == ("FAILED", "SmokeTestError")
    assert "2 of 2 smoke prompt(s) failed" in result["cause"] and "empty answer" in result["cause"]
    assert registry_items(workflow) == []


def test_polling_is_bounded(workflow: wf.ImportWorkflow, monkeypatch: pytest.MonkeyPatch) -> None:
    wf.upload_artifacts("manga-chat/2026-11-21/", wf.LLAMA_FILES)
    monkeypatch.setattr(emulated_bedrock.behaviour, "polls_in_progress", 10)

    result = wf.run(workflow, request(max_polls=3))

    assert (result["status"], result["error"]) == ("FAILED", "ImportJobTimedOut")
    assert "still InProgress after 3 polls" in result["cause"]
    assert wf.state_history(result["executionArn"]).count("GetImportJob") == 3


def test_reusing_an_import_id_for_other_artifacts_is_a_conflict(workflow: wf.ImportWorkflow) -> None:
    wf.upload_artifacts("manga-chat/2026-11-21/", wf.LLAMA_FILES)
    other = wf.upload_artifacts("manga-chat/2026-11-22/", wf.LLAMA_FILES)
    assert wf.run(workflow, request(), name="first")["status"] == "SUCCEEDED"

    result = wf.run(workflow, request(artifacts_s3_uri=other), name="second")

    # Same job name, new client token: Bedrock refuses instead of silently importing something else.
    assert (result["status"], result["error"]) == ("FAILED", "Bedrock.ConflictException")
    assert "already exists" in result["cause"]
    assert len(import_jobs()) == 1


# ---------------------------------------------------------------- the emulated API itself (over HTTP)


def test_emulated_create_model_import_job_checks_the_api_constraints(workflow: wf.ImportWorkflow) -> None:
    bedrock = boto3.client("bedrock")
    with pytest.raises(bedrock.exceptions.ValidationException) as caught:
        bedrock.create_model_import_job(
            jobName="-starts-with-a-dash",
            importedModelName="has.dots",
            roleArn="not-a-role",
            modelDataSource={"s3DataSource": {"s3Uri": "https://example.com/x"}},
        )
    message = str(caught.value)
    assert "4 validation error(s) detected" in message
    for member in ("'jobName'", "'importedModelName'", "'roleArn'", "'modelDataSource.s3DataSource.s3Uri'"):
        assert member in message
    assert import_jobs() == []


def test_emulated_converse_only_answers_for_imported_models(workflow: wf.ImportWorkflow) -> None:
    runtime = boto3.client("bedrock-runtime")
    with pytest.raises(runtime.exceptions.ResourceNotFoundException, match="emulated only for imported models"):
        runtime.converse(
            modelId="meta.llama3-8b-instruct-v1:0", messages=[{"role": "user", "content": [{"text": "hi"}]}]
        )
