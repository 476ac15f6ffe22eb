"""Demo part: ship a model version to Amazon Bedrock with Custom Model Import, safely.

The state machine runs from ``statemachines/bedrock_import.asl.json`` on the emulator; its Lambda tasks
run the project's real handlers. Bedrock Custom Model Import and Converse are emulated by this project
(``devtools/emulator_extensions/bedrock.py``): moto has neither.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import boto3

from devtools import bedrock_workflow as wf
from devtools.emulator import MotoServer
from devtools.emulator_extensions import bedrock as emulated_bedrock

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _request(import_id: str, folder: str) -> dict[str, Any]:
    with open(os.path.join(REPO, "events", "bedrock_validate_artifacts.json")) as f:
        request: dict[str, Any] = json.load(f)
    # Real imports poll every 60 s, doubling to 5 min; the emulated job finishes after two polls.
    return request | {
        "import_id": import_id,
        "version": import_id.rsplit("-", 1)[-1],
        "artifacts_s3_uri": f"{wf.ARTIFACT_ROOT}{folder}",
        "poll_initial_seconds": 0,
        "poll_max_seconds": 0,
    }


_BOOKKEEPING = {"StartPolling", "NextPollDelay", "WaitBeforePoll", "ImportJobStatus", "CountPoll", "PollBudgetLeft"}


def _message(cause: str) -> str:
    # A Lambda task's cause is the function's error payload (JSON); a service error's is plain text.
    try:
        return str(json.loads(cause)["errorMessage"])
    except (ValueError, KeyError, TypeError):
        return cause


def _story(title: str, workflow: wf.ImportWorkflow, request: dict[str, Any]) -> None:
    print(f"\n--- {title}\n    artifacts: {request['artifacts_s3_uri']}")
    result = wf.run(workflow, request)
    path = [s for s in wf.state_history(result["executionArn"]) if s not in _BOOKKEEPING]
    polls = path.count("GetImportJob")
    shown = [s for i, s in enumerate(path) if s != "GetImportJob" or path.index(s) == i]
    print(f"    states: {' -> '.join(s if s != 'GetImportJob' else f'GetImportJob x{polls}' for s in shown)}")
    if result["status"] == "SUCCEEDED":
        output = json.loads(result["output"])
        print(f"    SUCCEEDED: {output['model_name']} {output['version']} = {output['imported_model_arn']}")
        print(f"    smoke test: {output['smoke_test']}; registered in the model registry ({workflow.registry_table})")
    else:
        print(f"    {result['status']} with {result['error']}:")
        for part in _message(result["cause"]).split("; "):
            print(f"      {part}")
    for note in wf.notifications(workflow):
        print(f"    operations topic: [{note['Subject']}] {note['Message'][:160]}")


def run(emulator: MotoServer) -> None:
    # moto logs every failed execution at ERROR with its internals; the story below says what happened.
    logging.getLogger("moto.stepfunctions").setLevel(logging.CRITICAL)
    workflow = wf.deploy()
    os.environ.update(workflow.environment)
    print(f"Emulated AWS at {emulator.endpoint_url}: artifact bucket, registry table, state machine 'bedrock-import'.")
    wf.upload_artifacts("manga-chat/v7/", wf.LLAMA_FILES)
    broken = {k: v for k, v in wf.LLAMA_FILES.items() if not k.startswith("tokenizer")}
    broken["config.json"] = b'{"architectures": ["BertForMaskedLM"]}'
    wf.upload_artifacts("manga-chat/v8/", broken)
    wf.upload_artifacts("manga-chat/v9/", wf.LLAMA_FILES)
    emulated_bedrock.script_import_failure(
        "fleetops-manga-chat-v9", "The model's rope_scaling type 'yarn' is not supported for LlamaForCausalLM."
    )
    stories = [
        ("1. A complete Llama folder: validated, imported, smoke-tested, registered", "v7"),
        ("2. A broken folder: refused before any import job (no money spent)", "v8"),
        ("3. Bedrock rejects the model: its failureMessage reaches the operator", "v9"),
    ]
    with wf.handlers():
        for title, version in stories:
            _story(title, workflow, _request(f"manga-chat-{version}", f"manga-chat/{version}/"))
    jobs = boto3.client("bedrock").list_model_import_jobs()["modelImportJobSummaries"]
    names = ", ".join(sorted(j["jobName"] for j in jobs))
    print(f"\nImport jobs started in total: {len(jobs)} ({names}); v8 never reached Bedrock.")
