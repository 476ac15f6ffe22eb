"""The shadow capture's bucket and key in ``template.yaml``: users' conversations under their own key, TLS only,
read by the shadow comparison alone, expired by lifecycle; no other role of the stack reaches them."""

from __future__ import annotations

import json
from fnmatch import fnmatch
from typing import Any

from tests.unit.test_template_security import actions, raw, role_statements, transformed

COMPARE_ROLE = {"Fn::GetAtt": ["ShadowCompareFunctionRole", "Arn"]}
MODEL_ROLE = {"Ref": "ModelExecutionRoleArn"}
BUCKET_ARN = {"Fn::GetAtt": ["CaptureBucket", "Arn"]}
OBJECTS = {"Fn::Sub": "${CaptureBucket.Arn}/*"}
CAPTURES = {"Fn::Sub": "${CaptureBucket.Arn}/shadow-capture/*"}
#: What using a key means: any of these lets a principal read or write what it protects.
KEY_USE = ["kms:Encrypt", "kms:Decrypt", "kms:ReEncryptFrom", "kms:GenerateDataKey", "kms:CreateGrant"]


def resource(name: str) -> dict[str, Any]:
    found: dict[str, Any] = raw()["Resources"][name]
    return found


def statements(name: str, document: str) -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for s in resource(name)["Properties"][document]["Statement"]}


def test_the_capture_bucket_is_private_encrypted_with_the_capture_key_and_expires_what_it_holds() -> None:
    props = resource("CaptureBucket")["Properties"]
    [rule] = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "aws:kms",
        "KMSMasterKeyID": {"Fn::GetAtt": ["CaptureKey", "Arn"]},
    }
    assert set(props["PublicAccessBlockConfiguration"].values()) == {True}
    assert len(props["PublicAccessBlockConfiguration"]) == 4
    assert props["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    # Current and noncurrent versions and unfinished uploads all go; no version keeps a deleted conversation.
    [expiry] = props["LifecycleConfiguration"]["Rules"]
    assert expiry["Status"] == "Enabled" and "Prefix" not in expiry and "Filter" not in expiry
    assert expiry["ExpirationInDays"] <= 7
    assert expiry["NoncurrentVersionExpiration"]["NoncurrentDays"] <= 7
    assert expiry["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] <= 7
    assert "VersioningConfiguration" not in props


def test_the_capture_bucket_takes_tls_only_and_no_one_but_sagemaker_and_the_comparison_touches_captures() -> None:
    policy = statements("CaptureBucketPolicy", "PolicyDocument")
    assert resource("CaptureBucketPolicy")["Properties"]["Bucket"] == {"Ref": "CaptureBucket"}
    tls = policy["DenyInsecureTransport"]
    assert (tls["Effect"], tls["Principal"], tls["Action"]) == ("Deny", "*", "s3:*")
    assert tls["Resource"] == [BUCKET_ARN, OBJECTS]
    assert tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    reads = policy["NoOneButTheShadowComparisonReadsCaptures"]
    assert (reads["Effect"], reads["Principal"], reads["Resource"]) == ("Deny", "*", OBJECTS)
    assert "s3:GetObject" in actions(reads)
    assert reads["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": COMPARE_ROLE}}
    # Whatever an account principal's own IAM policy allows: only SageMaker writes (a forged capture would be
    # replayed as a user's request), only the comparison deletes.
    writes = policy["NoOneButSageMakerWritesCaptures"]
    assert (writes["Effect"], writes["Principal"], writes["Resource"]) == ("Deny", "*", OBJECTS)
    assert actions(writes) == {"s3:PutObject"}
    assert writes["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": MODEL_ROLE}}
    deletes = policy["NoOneButTheShadowComparisonDeletesCaptures"]
    assert (deletes["Effect"], deletes["Principal"], deletes["Resource"]) == ("Deny", "*", OBJECTS)
    assert actions(deletes) == {"s3:DeleteObject", "s3:DeleteObjectVersion"}
    assert deletes["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": COMPARE_ROLE}}
    allowed = [s for s in policy.values() if s["Effect"] == "Allow"]
    # SageMaker (as the model execution role) only writes, under the capture prefix; the comparison reads,
    # lists and deletes there; nobody else is named.
    assert {json.dumps(s["Principal"], sort_keys=True) for s in allowed} == {
        json.dumps({"AWS": MODEL_ROLE}, sort_keys=True),
        json.dumps({"AWS": COMPARE_ROLE}, sort_keys=True),
    }
    [write] = [s for s in allowed if s["Principal"] == {"AWS": MODEL_ROLE}]
    assert (actions(write), write["Resource"]) == ({"s3:PutObject"}, CAPTURES)
    compare = [s for s in allowed if s["Principal"] == {"AWS": COMPARE_ROLE}]
    assert set().union(*map(actions, compare)) == {"s3:GetObject", "s3:DeleteObject", "s3:ListBucket"}


def test_only_sagemaker_as_the_model_role_and_the_comparison_may_use_the_capture_key() -> None:
    key = resource("CaptureKey")["Properties"]
    assert key["EnableKeyRotation"] is True
    policy = statements("CaptureKey", "KeyPolicy")
    users = {
        json.dumps(s["Principal"], sort_keys=True): actions(s)
        for s in policy.values()
        if any(fnmatch(use, pattern) for use in KEY_USE for pattern in actions(s))
    }
    assert users == {
        json.dumps({"AWS": MODEL_ROLE}, sort_keys=True): {"kms:Encrypt", "kms:GenerateDataKey*"},
        json.dumps({"AWS": COMPARE_ROLE}, sort_keys=True): {"kms:Decrypt"},
    }
    for sid in ("SageMakerWritesCapturesAsTheModelExecutionRole", "ShadowComparisonReadsCaptures"):
        assert policy[sid]["Condition"] == {
            "StringEquals": {"kms:ViaService": {"Fn::Sub": "s3.${AWS::Region}.amazonaws.com"}}
        }
    # The account administers the key (so it can never be locked out) but cannot use it.
    admin = policy["AccountAdministersTheKeyWithoutUsingIt"]
    assert admin["Principal"] == {"AWS": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}}
    assert any(fnmatch("kms:PutKeyPolicy", pattern) for pattern in actions(admin))


def test_no_role_of_the_stack_reaches_the_captures_through_its_own_policy() -> None:
    # The artifact gate reads the whole model bucket: the captures are not there any more.
    for role, found in role_statements(transformed()).items():
        for statement in found:
            text = json.dumps(statement)
            assert "CaptureBucket" not in text and "shadow-capture" not in text, (role, statement)
    compare = transformed()["Resources"]["ShadowCompareFunctionRole"]
    assert "ModelArtifactBucket" not in json.dumps(compare)


def test_validate_plans_shadow_capture_into_the_capture_bucket_with_its_key() -> None:
    variables = resource("RolloutValidateFunction")["Properties"]["Environment"]["Variables"]
    assert variables["SHADOW_CAPTURE_BUCKET"] == {"Ref": "CaptureBucket"}
    assert variables["SHADOW_CAPTURE_KEY_ARN"] == {"Fn::GetAtt": ["CaptureKey", "Arn"]}
