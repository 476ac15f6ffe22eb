"""Who is one person for "the approver is not the requester": realistic caller ARNs, as AWS writes them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleetops.rollout.approval import ApprovalRecord, ApprovalRefusedError, check_not_requester
from fleetops.rollout.approval_identity import Person, not_distinct, person

ACCOUNT = "123456789012"
USER = f"arn:aws:iam::{ACCOUNT}:user/alice"
USER_IN_PATH = f"arn:aws:iam::{ACCOUNT}:user/platform/team-a/alice"
BOB = f"arn:aws:iam::{ACCOUNT}:user/bob"
DEPLOYER_ALICE = f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer/alice"
DEPLOYER_BOB = f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer/bob"
DEPLOYER_CI = f"arn:aws:sts::{ACCOUNT}:assumed-role/Deployer/GitHubActions-8812"
APPROVERS_BOB = f"arn:aws:sts::{ACCOUNT}:assumed-role/Approvers/bob"
SSO_ALICE = f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSReservedSSO_PowerUserAccess_3f2a9c1b0d4e5f67/alice@example.com"
SSO_ALICE_ADMIN = (
    f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSReservedSSO_AdministratorAccess_8d7c6b5a4f3e2d1c/Alice@Example.com"
)
SSO_BOB = f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSReservedSSO_PowerUserAccess_3f2a9c1b0d4e5f67/bob@example.com"


@pytest.mark.parametrize(
    ("arn", "source_identity", "kind", "key"),
    [
        (USER, None, "iam_user", f"aws:{ACCOUNT}:person/alice"),
        (USER_IN_PATH, None, "iam_user", f"aws:{ACCOUNT}:person/alice"),  # IAM names are unique whatever the path
        # A plain session name is the caller's choice: the role is all AWS vouches for.
        (DEPLOYER_ALICE, None, "role", f"aws:{ACCOUNT}:role/Deployer"),
        (DEPLOYER_CI, "alice", "source_identity", f"aws:{ACCOUNT}:person/alice"),
        (SSO_ALICE, None, "sso_user", f"aws:{ACCOUNT}:person/alice@example.com"),
        (f"arn:aws:iam::{ACCOUNT}:role/service-role/Deployer", None, "role", f"aws:{ACCOUNT}:role/Deployer"),
        (f"arn:aws:iam::{ACCOUNT}:root", None, "root", f"aws:{ACCOUNT}:root"),
        (f"arn:aws:sts::{ACCOUNT}:federated-user/alice", None, "federated_user", f"aws:{ACCOUNT}:federated-user"),
        (f"arn:aws-us-gov:iam::{ACCOUNT}:user/alice", None, "iam_user", f"aws-us-gov:{ACCOUNT}:person/alice"),
    ],
)
def test_a_caller_is_the_person_aws_vouches_for(arn: str, source_identity: str | None, kind: str, key: str) -> None:
    found = person(arn, source_identity)
    assert (found.kind, found.key) == (kind, key)


def _refusal(requester: Person, approver: Person) -> str | None:
    return not_distinct(requester, approver)


@pytest.mark.parametrize(
    ("requester", "approver", "says"),
    [
        # The same IAM user, written with or without its path, or in another case (IAM ignores it in names).
        (person(USER), person(USER_IN_PATH), "requested this rollout"),
        (person(USER), person(f"arn:aws:iam::{ACCOUNT}:user/Alice"), "requested this rollout"),
        # The same role under two session names is not two people.
        (person(DEPLOYER_ALICE), person(DEPLOYER_BOB), "a session of role Deployer is named by whoever assumes"),
        (person(DEPLOYER_CI), person(DEPLOYER_ALICE), "sign in through IAM Identity Center"),
        # One side names its person, the other is the shared role without one: the latter may be anyone.
        (person(DEPLOYER_ALICE), person(DEPLOYER_CI, "bob"), "may be one person"),
        # SourceIdentity, Identity Center and IAM user names are one namespace: the same name is the same person.
        (person(DEPLOYER_CI, "alice"), person(APPROVERS_BOB, "Alice"), "requested this rollout"),
        (person(SSO_ALICE), person(SSO_ALICE_ADMIN), "requested this rollout"),  # another permission set
        (person(USER), person(DEPLOYER_CI, "alice"), "requested this rollout"),
        (
            person(f"arn:aws:sts::{ACCOUNT}:federated-user/a"),
            person(f"arn:aws:sts::{ACCOUNT}:federated-user/b"),
            "federated user's name is chosen",
        ),
        (person(USER), person("arn:aws:lambda:us-east-1:123456789012:function:x"), "not a kind this check knows"),
    ],
)
def test_who_may_be_the_requester_is_refused_saying_why(requester: Person, approver: Person, says: str) -> None:
    why = _refusal(requester, approver)
    assert why is not None and says in why, why


@pytest.mark.parametrize(
    ("requester", "approver"),
    [
        (person(USER), person(BOB)),
        (person(DEPLOYER_ALICE), person(APPROVERS_BOB)),  # sessions of different roles
        (person(DEPLOYER_CI, "alice"), person(DEPLOYER_CI, "bob")),  # one shared role, two source identities
        (person(SSO_ALICE), person(SSO_BOB)),
        (person(DEPLOYER_CI), person(SSO_BOB)),  # a CI role requests, an Identity Center user approves
        (person(USER), person("arn:aws:iam::210987654321:user/alice")),  # another account's alice
    ],
)
def test_two_people_aws_tells_apart_may_request_and_approve(requester: Person, approver: Person) -> None:
    assert _refusal(requester, approver) is None


def test_the_approval_refuses_another_session_of_the_requesters_role_with_the_way_out() -> None:
    record = ApprovalRecord(
        approval_key="k",
        task_token="t",
        rollout_id="v7",
        endpoint_name="manga-chat",
        step_weight=100,
        summary="PASS",
        expires_at=int(datetime(2026, 11, 21, tzinfo=UTC).timestamp()),
        requested_by=DEPLOYER_ALICE,
    )
    with pytest.raises(ApprovalRefusedError) as refused:
        check_not_requester(record, DEPLOYER_BOB)
    assert (refused.value.reason, refused.value.http_status) == ("own_rollout", 403)
    # What the person sees: why, and what to do instead.
    assert "may be one person" in str(refused.value) and "IAM Identity Center" in str(refused.value)
    assert "SourceIdentity" in str(refused.value)
    check_not_requester(record, SSO_BOB)  # an Identity Center user may
