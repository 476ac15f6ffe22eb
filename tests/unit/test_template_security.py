"""Security properties of ``template.yaml``, read as written and after the SAM transform, and the IaC scan itself.

The transform and the scan run in the scanner's environment (``.venv-iac``, built by ``make install``): the
transformed template shows what SAM generates (roles with their policy-template statements, rule targets).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetops.config import load_fleet_config
from tests.conftest import REPO
from tests.unit.cfn_yaml import load, resources_of_type

IAC_PYTHON = REPO / ".venv-iac" / "bin" / "python"
SCAN = REPO / "security" / "iac_scan.py"
HISTORY_TABLES = ["AuditTable", "ModelRegistryTable", "CalendarTable"]
KEY_ACTIONS = {"kms:GenerateDataKey*", "kms:Decrypt"}


def _iac_python() -> Path:
    if not IAC_PYTHON.exists():
        pytest.fail(f"{IAC_PYTHON} is missing: `make install` (or `make .stamps/iac`) builds the scanner's environment")
    return IAC_PYTHON


@cache
def raw() -> dict[str, Any]:
    return load(REPO / "template.yaml")


@cache
def transformed() -> dict[str, Any]:
    code = (
        "import json, sys; from pathlib import Path; sys.path.insert(0, 'security'); "
        "from iac_scan import sam_transformed; print(json.dumps(sam_transformed(Path('template.yaml'))))"
    )
    done = subprocess.run([_iac_python(), "-c", code], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_statements(template: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Every IAM role's statements: its inline policies and the stack's managed policies it attaches by Ref."""
    resources = template["Resources"]
    found: dict[str, list[dict[str, Any]]] = {}
    for name, role in resources_of_type(template, "AWS::IAM::Role").items():
        props = role["Properties"]
        statements = [s for p in props.get("Policies", []) for s in _listed(p["PolicyDocument"]["Statement"])]
        for arn in props.get("ManagedPolicyArns", []):
            if isinstance(arn, dict) and "Ref" in arn and arn["Ref"] in resources:
                statements += _listed(resources[arn["Ref"]]["Properties"]["PolicyDocument"]["Statement"])
        found[name] = statements
    return found


def actions(statement: dict[str, Any]) -> set[str]:
    return set(_listed(statement["Action"]))


# ---------------------------------------------------------------- the operations topic and its key


def test_the_operations_topic_has_a_rotating_key_of_its_own_with_an_alias() -> None:
    resources = raw()["Resources"]
    assert resources["OperationsTopic"]["Properties"]["KmsMasterKeyId"] == {"Ref": "OperationsKey"}
    assert resources["OperationsKey"]["Type"] == "AWS::KMS::Key"
    assert resources["OperationsKey"]["Properties"]["EnableKeyRotation"] is True
    [alias] = resources_of_type(raw(), "AWS::KMS::Alias").values()
    assert alias["Properties"]["TargetKeyId"] == {"Ref": "OperationsKey"}
    assert "alias/aws/" not in json.dumps(raw())  # no AWS managed key anywhere: alarms and EventBridge cannot use one


def test_cloudwatch_alarms_of_this_account_only_may_use_the_key() -> None:
    statements = raw()["Resources"]["OperationsKey"]["Properties"]["KeyPolicy"]["Statement"]
    [cloudwatch] = [s for s in statements if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}]
    assert actions(cloudwatch) == KEY_ACTIONS
    assert cloudwatch["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert ":alarm:*" in cloudwatch["Condition"]["ArnLike"]["aws:SourceArn"]["Fn::Sub"]
    services = [s for s in statements if "Service" in s["Principal"]]
    assert all(s["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"} for s in services)


def test_every_role_that_publishes_to_the_topic_may_use_its_key() -> None:
    publishers = 0
    for role, statements in role_statements(transformed()).items():
        if any("sns:Publish" in actions(s) for s in statements):
            publishers += 1
            key_use = [s for s in statements if actions(s) >= KEY_ACTIONS]
            assert any(s["Resource"] == {"Fn::GetAtt": ["OperationsKey", "Arn"]} for s in key_use), role
    assert publishers >= 5  # alarm responder, approval notify, the rollout, rollback and Bedrock import machines


# ---------------------------------------------------------------- dead-letter queues


def test_every_queue_is_declared_encrypted_kept_14_days_and_alarmed_to_the_topic() -> None:
    queues = resources_of_type(transformed(), "AWS::SQS::Queue")
    assert set(queues) == set(resources_of_type(raw(), "AWS::SQS::Queue")) == {"AlarmResponderDLQ", "AlarmEventsDLQ"}
    alarms = resources_of_type(transformed(), "AWS::CloudWatch::Alarm").values()
    for name, queue in queues.items():
        assert queue["Properties"]["KmsMasterKeyId"] == {"Ref": "OperationsKey"}, name
        assert queue["Properties"]["MessageRetentionPeriod"] == 1209600, name
        [alarm] = [
            a["Properties"]
            for a in alarms
            if a["Properties"].get("Dimensions")
            == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [name, "QueueName"]}}]
        ]
        assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
        assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
        assert alarm["AlarmActions"] == [{"Ref": "OperationsTopic"}]


def test_alarm_events_dead_letter_into_the_declared_queue_from_the_responder_rule_only() -> None:
    template = transformed()
    rule = template["Resources"]["AlarmResponderFunctionOwnAlarmStateChange"]["Properties"]
    [target] = rule["Targets"]
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": ["AlarmEventsDLQ", "Arn"]}}
    [statement] = template["Resources"]["AlarmEventsDLQPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert statement["Condition"] == {
        "ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": ["AlarmResponderFunctionOwnAlarmStateChange", "Arn"]}}
    }


# ---------------------------------------------------------------- tables and the audit trail


@pytest.mark.parametrize("table", HISTORY_TABLES)
def test_history_tables_outlive_the_stack_and_refuse_deletion(table: str) -> None:
    resource = raw()["Resources"][table]
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert resource["Properties"]["DeletionProtectionEnabled"] is True
    assert resource["Properties"]["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_every_role_may_only_append_to_the_audit_table() -> None:
    writers = set()
    for role, statements in role_statements(transformed()).items():
        for statement in statements:
            if statement["Effect"] == "Allow" and "AuditTable" in json.dumps(statement["Resource"]):
                assert actions(statement) == {"dynamodb:PutItem"}, f"{role}: {sorted(actions(statement))}"
                writers.add(role)
    assert len(writers) >= 5  # prescale, alarm responder, approval endpoint, the rollout and rollback machines


def _audit_put_states() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted((REPO / "statemachines").glob("*.asl.json")):
        for name, state in json.loads(path.read_text())["States"].items():
            if state.get("Parameters", {}).get("TableName") == "${AuditTableName}":
                found.append((f"{path.name}:{name}", state))
    return found


def test_audit_writes_in_the_workflows_never_overwrite_and_their_own_retry_continues() -> None:
    states = _audit_put_states()
    assert len(states) >= 5
    for where, state in states:
        params = state["Parameters"]
        assert state["Resource"] == "arn:aws:states:::dynamodb:putItem", where
        names = params["ExpressionAttributeNames"]
        assert params["ConditionExpression"] == "attribute_not_exists(#record_id)", where
        assert names == {"#record_id": "record_id"}, where
        # The key is the state's entry time and the execution: only this state's earlier attempt can hold it.
        assert "$$.State.EnteredTime" in params["Item"]["record_id"]["S.$"], where
        assert "$$.Execution.Name" in params["Item"]["record_id"]["S.$"], where
        duplicate = state["Catch"][0]
        assert duplicate["ErrorEquals"] == ["DynamoDB.ConditionalCheckFailedException"], where
        assert (duplicate["Next"], duplicate["ResultPath"]) == (state["Next"], None), where


# ---------------------------------------------------------------- what a rollout may deploy, and where


def test_only_the_stacks_model_role_is_passed_and_only_to_sagemaker() -> None:
    passing = [
        (role, s)
        for role, statements in role_statements(transformed()).items()
        for s in statements
        if "iam:PassRole" in actions(s)
    ]
    to_sagemaker = [s for _, s in passing if "sagemaker" in json.dumps(s.get("Condition"))]
    [statement] = to_sagemaker
    assert statement["Resource"] == {"Ref": "ModelExecutionRoleArn"}
    assert statement["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    assert all(s["Resource"] != "*" and "role/*" not in json.dumps(s["Resource"]) for _, s in passing)


def test_models_are_created_network_isolated_under_the_stacks_endpoint_name() -> None:
    statements = [
        s for ss in role_statements(transformed()).values() for s in ss if "sagemaker:CreateModel" in actions(s)
    ]
    [statement] = statements
    assert actions(statement) == {"sagemaker:CreateModel"}
    assert statement["Condition"] == {"Bool": {"sagemaker:NetworkIsolation": "true"}}
    assert statement["Resource"]["Fn::Sub"].endswith(":model/${RemediatedEndpointName}-*")


def test_sagemaker_permissions_reach_only_the_stacks_endpoint() -> None:
    endpoint_grants = 0
    for role, statements in role_statements(transformed()).items():
        for statement in statements:
            if not any(a.startswith("sagemaker:") for a in actions(statement)):
                continue
            for resource in _listed(statement["Resource"]):
                arn = json.dumps(resource)
                assert "endpoint/*" not in arn, f"{role}: {arn}"
                if ":endpoint/" in arn:
                    endpoint_grants += 1
                    assert arn.endswith(':endpoint/${RemediatedEndpointName}"}'), f"{role}: {arn}"
    assert endpoint_grants >= 5  # validate, rollback plan, rollback, rollout, alarm responder


def test_application_autoscaling_is_limited_to_sagemaker_variant_counts() -> None:
    limited = 0
    for role, statements in role_statements(transformed()).items():
        for statement in statements:
            writes = {
                a for a in actions(statement) if a.startswith("application-autoscaling:") and ":Describe" not in a
            }
            if writes:
                assert statement["Condition"]["StringEquals"] == {
                    "application-autoscaling:service-namespace": "sagemaker",
                    "application-autoscaling:scalable-dimension": "sagemaker:variant:DesiredInstanceCount",
                }, role
                limited += 1
    assert limited == 3  # the prescale reconciler, the alarm responder and the rollout's canary target


def test_validate_is_given_the_stacks_role_and_image_repository() -> None:
    variables = raw()["Resources"]["RolloutValidateFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["MODEL_EXECUTION_ROLE_ARN"] == {"Ref": "ModelExecutionRoleArn"}
    assert variables["MODEL_IMAGE_REPOSITORY"] == {"Ref": "ModelImageRepositoryUri"}


def test_no_stack_defaults_to_an_endpoint_and_each_environment_names_its_own() -> None:
    template = raw()
    parameters = template["Parameters"]
    for name in ("RemediatedEndpointName", "ModelExecutionRoleArn", "ModelImageRepositoryUri"):
        assert parameters[name]["Default"] == "", name  # nothing to fall back on ...
        refused = [a["Assert"] for rule in template["Rules"].values() for a in rule["Assertions"]]
        assert {"Fn::Not": [{"Fn::Equals": [{"Ref": name}, ""]}]} in refused, name  # ... and empty is refused
    fleet = yaml.safe_load((REPO / "layers" / "core" / "fleet_config" / "fleet.yaml").read_text())
    prod_endpoints = {e["name"] for e in fleet["endpoints"] if e["environment"] == "prod"}
    config = tomllib.loads((REPO / "samconfig.toml").read_text())

    def endpoint_of(env: str) -> str:
        overrides: str = config[env]["deploy"]["parameters"]["parameter_overrides"]
        [value] = [p.split("=", 1)[1].strip('"') for p in overrides.split() if p.startswith("RemediatedEndpointName=")]
        return value

    assert endpoint_of("prod") in prod_endpoints
    assert endpoint_of("default") not in prod_endpoints  # the dev stack never manages a prod endpoint


# ---------------------------------------------------------------- the scan


def test_the_scan_fails_on_a_planted_finding_and_on_a_stale_acceptance(tmp_path: Path) -> None:
    text = (REPO / "template.yaml").read_text()
    planted = "      KmsMasterKeyId: !Ref OperationsKey\n"
    topic = "  OperationsTopic:\n    Type: AWS::SNS::Topic\n    Properties:\n"
    assert text.count(topic + planted) == 1
    (tmp_path / "template.yaml").write_text(text.replace(topic + planted, topic + "      DisplayName: ops\n"))
    shutil.copytree(REPO / "statemachines", tmp_path / "statemachines")  # the transform inlines the definitions
    accepted = yaml.safe_load((REPO / "security" / "accepted_findings.yaml").read_text())
    accepted["accepted"].append(
        {"check": "CKV_AWS_26", "form": "raw", "template": "template.yaml", "resources": ["AWS::SNS::Topic.Gone"]}
        | {"reason": "planted: matches nothing"}
    )
    (tmp_path / "accepted.yaml").write_text(yaml.safe_dump(accepted))

    done = subprocess.run(
        [_iac_python(), SCAN, tmp_path / "template.yaml", "--accepted", tmp_path / "accepted.yaml"],
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 1, done.stdout + done.stderr
    assert "NEW FINDING CKV_AWS_26 raw template.yaml AWS::SNS::Topic.OperationsTopic" in done.stdout
    assert "NEW FINDING CKV_AWS_26 transformed template.yaml AWS::SNS::Topic.OperationsTopic" in done.stdout
    assert "STALE ACCEPTANCE CKV_AWS_26 raw template.yaml AWS::SNS::Topic.Gone" in done.stdout


def test_an_acceptance_without_a_reason_is_refused_before_scanning(tmp_path: Path) -> None:
    (tmp_path / "accepted.yaml").write_text(
        "accepted:\n  - {check: CKV_AWS_18, form: raw, template: template.yaml, resources: [AWS::S3::Bucket.B]}\n"
    )
    done = subprocess.run(
        [_iac_python(), SCAN, REPO / "template.yaml", "--accepted", tmp_path / "accepted.yaml"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "accepted[0]: missing or empty reason" in done.stderr


@pytest.mark.parametrize("profile", ["default", "prod"])
def test_each_samconfig_environment_names_an_endpoint_fleet_yaml_lists_for_it(profile: str) -> None:
    """A stack whose endpoint fleet.yaml does not list for its environment refuses every workflow on it."""
    samconfig = tomllib.loads((REPO / "samconfig.toml").read_text())
    overrides = dict(
        pair.split("=", 1) for pair in shlex.split(samconfig[profile]["deploy"]["parameters"]["parameter_overrides"])
    )
    fleet = load_fleet_config(REPO / "layers/core/fleet_config/fleet.yaml")
    endpoint = fleet.endpoint(overrides["RemediatedEndpointName"])
    assert endpoint is not None, overrides
    assert endpoint.environment == overrides["EnvironmentName"]
    assert fleet.managed_by(overrides["EnvironmentName"]) == (endpoint,)
