"""Least privilege of the Bedrock import resources in ``template.yaml`` (read with CloudFormation's short tags)."""

from __future__ import annotations

from typing import Any

from tests.unit.test_state_machine_substitutions import load_template

OWN = ["BedrockImportStateMachine", "BedrockValidateArtifactsFunction", "BedrockSmokeTestFunction", "BedrockImportRole"]
# Log-delivery set-up is documented by AWS with Resource "*" only; nothing else may use a wildcard resource.
WILDCARD_OK = {
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
}


def statements(resource: dict[str, Any]) -> list[dict[str, Any]]:
    props = resource["Properties"]
    found: list[dict[str, Any]] = []
    for policy in props.get("Policies", []):
        if isinstance(policy, dict) and "Statement" in policy:
            found.extend(policy["Statement"])
        elif isinstance(policy, dict) and "PolicyDocument" in policy:
            found.extend(policy["PolicyDocument"]["Statement"])
    return found


def actions(statement: dict[str, Any]) -> list[str]:
    value = statement["Action"]
    return [value] if isinstance(value, str) else list(value)


def test_pass_role_only_for_the_import_role_and_only_to_bedrock() -> None:
    resources = load_template()["Resources"]
    passing = [(name, s) for name in OWN for s in statements(resources[name]) if "iam:PassRole" in actions(s)]
    assert [name for name, _ in passing] == ["BedrockImportStateMachine"]
    _, statement = passing[0]
    assert statement["Resource"] == {"Fn::GetAtt": ["BedrockImportRole", "Arn"]}
    assert statement["Condition"] == {"StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}}


def test_the_import_role_trusts_only_bedrock_of_this_account() -> None:
    role = load_template()["Resources"]["BedrockImportRole"]["Properties"]
    [trust] = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "bedrock.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}


def test_no_wildcard_resources_beyond_log_delivery() -> None:
    resources = load_template()["Resources"]
    for name in OWN:
        for statement in statements(resources[name]):
            if statement.get("Resource") == "*":
                assert set(actions(statement)) <= WILDCARD_OK, f"{name}: {actions(statement)} on Resource '*'"


def test_artifact_reads_are_limited_to_the_import_prefix() -> None:
    resources = load_template()["Resources"]
    for name in ("BedrockImportRole", "BedrockValidateArtifactsFunction"):
        for statement in statements(resources[name]):
            if "s3:GetObject" in actions(statement):
                assert statement["Resource"] == {"Fn::Sub": "${ModelArtifactBucket.Arn}/bedrock-imports/*"}
            if "s3:ListBucket" in actions(statement):
                assert statement["Condition"] == {"StringLike": {"s3:prefix": "bedrock-imports/*"}}
