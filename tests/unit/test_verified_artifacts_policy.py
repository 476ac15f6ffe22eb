"""Only the artifact gate's role may write ``verified/``, the pinned copies the rollout's models deploy.

Read from ``template.yaml`` (as written, and after the SAM transform for the generated roles), in the style of
``test_template_security.py``: moto does not enforce bucket policies, so the emulator cannot show the denial. The
bucket policy's statements are evaluated here for the principals that matter, by a small evaluator of exactly
the forms the policy uses (an unknown condition operator fails the test rather than being guessed at).
"""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any

from fleetops.promotion.artifact_pin import VERIFIED_PREFIX, verified_key
from tests.unit.test_template_security import actions, raw, role_statements, transformed

BUCKET = "manga-llm-fleet-modelartifactbucket-1a2b3c"
ACCOUNT = "123456789012"
#: What each logical id's ARN resolves to in this evaluation (the deployed names do not matter, only who is who).
ARNS = {
    "ModelArtifactBucket.Arn": f"arn:aws:s3:::{BUCKET}",
    "ArtifactGateFunctionRole.Arn": f"arn:aws:iam::{ACCOUNT}:role/manga-llm-fleet-ArtifactGateFunctionRole-X1",
}
GATE = ARNS["ArtifactGateFunctionRole.Arn"]
OTHERS = [
    f"arn:aws:iam::{ACCOUNT}:user/hana",  # an operator who may upload models/
    f"arn:aws:iam::{ACCOUNT}:role/manga-llm-fleet-RolloutValidateFunctionRole-Y2",
    f"arn:aws:iam::{ACCOUNT}:role/manga-llm-sagemaker-execution",  # SageMaker, which reads the copies
    f"arn:aws:iam::{ACCOUNT}:root",
]
PINNED = f"arn:aws:s3:::{BUCKET}/{verified_key('ab' * 32)}"
UPLOADED = f"arn:aws:s3:::{BUCKET}/models/manga-llama/v7/model.tar.gz"


def _resolve(value: Any) -> str:
    if isinstance(value, str):
        return value
    if "Fn::Sub" in value:
        return re.sub(r"\$\{([\w.]+)\}", lambda m: ARNS[m.group(1)], value["Fn::Sub"])
    if "Fn::GetAtt" in value:
        target = value["Fn::GetAtt"]
        return ARNS[target if isinstance(target, str) else ".".join(target)]
    raise AssertionError(f"cannot resolve {value!r}")


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches(patterns: Any, value: str) -> bool:
    return any(fnmatch.fnmatchcase(value.lower(), _resolve(p).lower()) for p in _listed(patterns))


def _condition_holds(condition: dict[str, Any], principal: str) -> bool:
    context = {"aws:PrincipalArn": principal}
    for operator, keys in condition.items():
        for key, expected in keys.items():
            values = [_resolve(v) for v in _listed(expected)]
            if operator == "ArnNotEquals":
                holds = context[key] not in values
            elif operator == "ArnEquals":
                holds = context[key] in values
            else:
                raise AssertionError(f"the evaluator does not know {operator}: extend it")
            if not holds:
                return False
    return True


def bucket_policy() -> list[dict[str, Any]]:
    policy = raw()["Resources"]["ModelArtifactBucketPolicy"]["Properties"]
    assert policy["Bucket"] == {"Ref": "ModelArtifactBucket"}
    return _listed(policy["PolicyDocument"]["Statement"])


def denied(principal: str, action: str, resource: str) -> bool:
    """Whether an explicit Deny of the bucket policy applies (which no Allow anywhere can override)."""
    return any(
        s["Effect"] == "Deny"
        and s["Principal"] == "*"
        and _matches(s["Action"], action)
        and _matches(s["Resource"], resource)
        and _condition_holds(s.get("Condition", {}), principal)
        for s in bucket_policy()
    )


def test_no_principal_but_the_gates_role_may_write_a_verified_artifact() -> None:
    for principal in OTHERS:
        assert denied(principal, "s3:PutObject", PINNED), principal
    assert not denied(GATE, "s3:PutObject", PINNED)


def test_the_policy_leaves_uploads_and_reads_alone() -> None:
    for principal in [*OTHERS, GATE]:
        assert not denied(principal, "s3:PutObject", UPLOADED), principal  # operators upload models/ as before
        assert not denied(principal, "s3:GetObject", PINNED), principal  # SageMaker downloads the pinned copy


def test_the_exempt_role_is_the_gate_functions_own_and_may_write_only_verified() -> None:
    resources = transformed()["Resources"]
    assert resources["ArtifactGateFunction"]["Properties"]["Role"] == {
        "Fn::GetAtt": ["ArtifactGateFunctionRole", "Arn"]
    }
    [deny] = bucket_policy()
    assert _resolve(deny["Resource"]) == f"arn:aws:s3:::{BUCKET}/{VERIFIED_PREFIX}*"
    gate = role_statements(transformed())["ArtifactGateFunctionRole"]
    writes = [s for s in gate if "s3:PutObject" in actions(s)]
    assert [_resolve(s["Resource"]) for s in writes] == [f"arn:aws:s3:::{BUCKET}/{VERIFIED_PREFIX}*"]
    # The copy names the version the gate hashed: reading a version is its own permission.
    assert any("s3:GetObjectVersion" in actions(s) for s in gate)


def test_no_other_role_of_the_stack_is_granted_a_write_under_verified() -> None:
    writers = []
    for role, statements in role_statements(transformed()).items():
        for statement in statements:
            writes = any(fnmatch.fnmatchcase("s3:PutObject", a) for a in actions(statement))
            on_the_bucket = "ModelArtifactBucket" in json.dumps(statement["Resource"])
            if statement["Effect"] == "Allow" and writes and on_the_bucket and _matches(statement["Resource"], PINNED):
                writers.append(role)
    assert writers == ["ArtifactGateFunctionRole"]
