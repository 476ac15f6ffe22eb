"""Every state machine's ``${X}`` placeholders match its ``DefinitionSubstitutions``, and every ASL file is valid.

The template is parsed with a YAML loader that understands CloudFormation's short tags (``!Ref``,
``!GetAtt``, ``!Sub`` ...). The ASL files are checked with the ``asl-validator`` npm package (installed
by ``npm install`` at the repository root, as ``make test`` does).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.unit.cfn_yaml import CfnLoader, load

STATEMACHINES = sorted((REPO / "statemachines").glob("*.asl.json"))
PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
SUB_VARIABLE = re.compile(r"\$\{([A-Za-z0-9_:.]+)\}")  # !Sub also knows ${AWS::Region} and ${Res.Attr}
STATE_MACHINE_TYPES = {"AWS::Serverless::StateMachine", "AWS::StepFunctions::StateMachine"}


def load_template() -> dict[str, Any]:
    return load(REPO / "template.yaml")


def machine_for(asl: Path) -> dict[str, Any]:
    relative = asl.relative_to(REPO).as_posix()
    machine = state_machines().get(relative)
    assert machine is not None, f"no state machine in template.yaml has DefinitionUri: {relative}"
    return machine


def state_machines() -> dict[str, dict[str, Any]]:
    """State machine resources keyed by the ASL file they load (relative path)."""
    found: dict[str, dict[str, Any]] = {}
    for name, resource in load_template()["Resources"].items():
        if resource.get("Type") in STATE_MACHINE_TYPES and isinstance(resource["Properties"].get("DefinitionUri"), str):
            found[resource["Properties"]["DefinitionUri"]] = {"name": name, **resource["Properties"]}
    return found


def referenced_resources(value: Any) -> set[str]:
    """Logical ids that a substitution value points at through Ref / GetAtt / Sub."""
    if isinstance(value, dict):
        if "Ref" in value:
            return {str(value["Ref"])}
        if "Fn::GetAtt" in value:
            return {str(value["Fn::GetAtt"][0])}
        if "Fn::Sub" in value:
            text = value["Fn::Sub"] if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"][0]
            return {m.split(".")[0] for m in SUB_VARIABLE.findall(text)}
        return set().union(*(referenced_resources(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(referenced_resources(v) for v in value))
    return set()


def test_there_are_state_machines_to_check() -> None:
    assert STATEMACHINES, "statemachines/*.asl.json is empty: this test would check nothing"


@pytest.mark.parametrize("asl", STATEMACHINES, ids=lambda p: p.name)
def test_placeholders_and_substitutions_match_both_ways(asl: Path) -> None:
    relative = asl.relative_to(REPO).as_posix()
    machine = machine_for(asl)

    used = set(PLACEHOLDER.findall(asl.read_text()))
    given = set(machine.get("DefinitionSubstitutions", {}))
    assert used - given == set(), f"{relative}: ${{X}} without a DefinitionSubstitutions entry in {machine['name']}"
    assert given - used == set(), f"{machine['name']}: DefinitionSubstitutions never used in {relative}"


@pytest.mark.parametrize("asl", STATEMACHINES, ids=lambda p: p.name)
def test_substitutions_point_at_resources_of_this_template(asl: Path) -> None:
    template = load_template()
    known = (
        set(template["Resources"])
        | set(template.get("Parameters", {}))
        | {"AWS::Region", "AWS::AccountId", "AWS::Partition"}
    )
    machine = machine_for(asl)
    for key, value in machine.get("DefinitionSubstitutions", {}).items():
        targets = referenced_resources(value)
        assert targets, f"{key}: hard-coded value {value!r}; use !Ref / !GetAtt so the ARN is the stack's own"
        assert targets <= known, f"{key} refers to unknown resources {sorted(targets - known)}"


@pytest.mark.parametrize("asl", STATEMACHINES, ids=lambda p: p.name)
def test_no_hard_coded_account_or_region_in_asl(asl: Path) -> None:
    text = asl.read_text()
    assert not re.search(r"\b\d{12}\b", text), "account id in ASL: pass it through DefinitionSubstitutions"
    assert not re.search(r"arn:aws:(?!states:::)[a-z0-9-]+:[a-z]{2}-[a-z]+-\d", text), "region-bound ARN in ASL"


def test_the_substitution_check_catches_a_missing_and_an_unused_entry() -> None:
    # The check above must be able to fail: a placeholder nobody provides and an entry nobody uses.
    used = set(PLACEHOLDER.findall('{"Resource": "${ThisFunctionArn}", "Topic": "${TopicArn}"}'))
    given = {"TopicArn", "LeftOverArn"}
    assert (used - given, given - used) == ({"ThisFunctionArn"}, {"LeftOverArn"})


def test_cfn_loader_reads_short_tags() -> None:
    loaded = yaml.load("a: !Ref X\nb: !GetAtt Fn.Arn\nc: !Sub 'arn:${AWS::Partition}:${Y.Arn}'\n", Loader=CfnLoader)
    assert loaded["a"] == {"Ref": "X"} and loaded["b"] == {"Fn::GetAtt": ["Fn", "Arn"]}
    assert referenced_resources(loaded["c"]) == {"AWS::Partition", "Y"}


# ---------------------------------------------------------------- asl-validator


def asl_validator(*paths: Path) -> subprocess.CompletedProcess[str]:
    npx = shutil.which("npx")
    assert npx, "npx not found: install Node 20; `make install` runs `npm ci` for asl-validator"
    assert (REPO / "node_modules" / "asl-validator").is_dir(), (
        "asl-validator missing: run `npm install` at the repository root"
    )
    # --json-path takes a file (repeatable); --json-definition takes JSON text: given a file name it only
    # prints "Unable to parse JSON definition" and still exits 0.
    args = [arg for path in paths for arg in ("--json-path", str(path))]
    return subprocess.run(
        [npx, "--no-install", "asl-validator", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_asl_validator_accepts_every_state_machine() -> None:
    result = asl_validator(*STATEMACHINES)
    assert result.returncode == 0, result.stdout + result.stderr
    for asl in STATEMACHINES:
        assert f'"{asl}" is valid' in result.stdout, result.stdout + result.stderr


def test_asl_validator_rejects_a_broken_definition(tmp_path: Path) -> None:
    broken = tmp_path / "broken.asl.json"
    broken.write_text(json.dumps({"StartAt": "Missing", "States": {"Only": {"Type": "Pass", "Next": "Nowhere"}}}))
    result = asl_validator(broken)
    assert result.returncode != 0
    assert "MISSING_TRANSITION_TARGET" in result.stdout + result.stderr
