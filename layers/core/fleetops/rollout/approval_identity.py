"""Who a caller is, as compared for "the approver is not the requester": the identity a person cannot multiply.

An IAM user is a person. A role session is not: whoever may assume a role picks its session name, so
``assumed-role/Deployer/alice`` and ``assumed-role/Deployer/bob`` may be one person. A session names a person
only when AWS vouches for the name: the session's ``SourceIdentity`` (set once, kept through role chaining), or
the session name of an IAM Identity Center role (``AWSReservedSSO_*``), which Identity Center sets to the user.
Names are compared case-insensitively (IAM does not let two users differ only by case) and across kinds: the
IAM user ``alice``, a session with SourceIdentity ``alice`` and the SSO user ``alice`` are one person, so a
mix-up refuses rather than lets someone approve their own rollout.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

Kind = Literal["iam_user", "source_identity", "sso_user", "root", "role", "federated_user", "unknown"]

#: Role-name prefix of the roles IAM Identity Center creates for its permission sets.
SSO_ROLE_PREFIX = "AWSReservedSSO_"

_ASSUMED_ROLE = re.compile(r"^arn:(?P<p>[\w-]+):sts::(?P<acct>\d{12}):assumed-role/(?P<role>[^/]+)/(?P<session>.+)$")
_IAM = re.compile(r"^arn:(?P<p>[\w-]+):(?:iam|sts)::(?P<acct>\d{12}):(?P<kind>user|role|root)(?:/(?P<rest>.+))?$")
_FEDERATED = re.compile(r"^arn:(?P<p>[\w-]+):sts::(?P<acct>\d{12}):federated-user/.+$")


class Person(BaseModel):
    """The person (or the shared principal) behind a caller ARN."""

    model_config = ConfigDict(frozen=True)

    arn: str
    kind: Kind
    #: What is compared: ``<partition>:<account>:person/<name>`` for a named person, else the shared principal.
    key: str
    #: The role a session belongs to (``<partition>:<account>:role/<name>``), whatever names the person.
    role: str | None = None

    @property
    def named(self) -> bool:
        """Whether AWS vouches for one person behind this caller (not a role's or federation's own choice)."""
        return self.kind in ("iam_user", "source_identity", "sso_user", "root")


def person(arn: str, source_identity: str | None = None) -> Person:
    """The person behind ``arn`` (a caller's IAM ARN as AWS asserted it), with the session's SourceIdentity if any.

    Examples
    --------
    >>> person("arn:aws:iam::123456789012:user/team-a/Alice").key
    'aws:123456789012:person/alice'
    >>> person("arn:aws:sts::123456789012:assumed-role/Deployer/alice").key  # the name is the caller's choice
    'aws:123456789012:role/Deployer'
    >>> person("arn:aws:sts::123456789012:assumed-role/Deployer/ci-42", source_identity="alice").key
    'aws:123456789012:person/alice'
    >>> person("arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Admin_0a1b2c3d4e5f6a7b/alice@example.com").kind
    'sso_user'
    """
    found = _ASSUMED_ROLE.fullmatch(arn)
    if found:
        return _session(arn, f"{found['p']}:{found['acct']}", found["role"], found["session"], source_identity)
    found = _IAM.fullmatch(arn)
    if found:
        account = f"{found['p']}:{found['acct']}"
        name = (found["rest"] or "").rsplit("/", 1)[-1]
        if found["kind"] == "user" and name:
            return Person(arn=arn, kind="iam_user", key=_named(account, name))
        if found["kind"] == "root":
            return Person(arn=arn, kind="root", key=f"{account}:root")
        return Person(arn=arn, kind="role", key=f"{account}:role/{name}", role=f"{account}:role/{name}")
    found = _FEDERATED.fullmatch(arn)
    if found:  # GetFederationToken: the caller names the federated user, and the IAM user behind it is not shown
        return Person(arn=arn, kind="federated_user", key=f"{found['p']}:{found['acct']}:federated-user")
    return Person(arn=arn, kind="unknown", key=arn)


def _session(arn: str, account: str, role_name: str, session: str, source_identity: str | None) -> Person:
    role = f"{account}:role/{role_name}"
    if source_identity:
        return Person(arn=arn, kind="source_identity", key=_named(account, source_identity), role=role)
    if role_name.startswith(SSO_ROLE_PREFIX):  # Identity Center names the session after its user
        return Person(arn=arn, kind="sso_user", key=_named(account, session), role=role)
    return Person(arn=arn, kind="role", key=role, role=role)


def _named(account: str, name: str) -> str:
    return f"{account}:person/{name.casefold()}"


def not_distinct(requester: Person, approver: Person, rollout: str = "this rollout") -> str | None:
    """Why ``approver`` may be the person who requested (a refusal for them to read), or None when they are not.

    Examples
    --------
    >>> alice = person("arn:aws:sts::123456789012:assumed-role/Deployer/alice")
    >>> bob = person("arn:aws:sts::123456789012:assumed-role/Deployer/bob")
    >>> print(not_distinct(alice, bob))  # doctest: +ELLIPSIS
    arn:aws:sts::...:assumed-role/Deployer/bob and the requester ... may be one person: a session of role Deployer...
    >>> not_distinct(alice, person("arn:aws:iam::123456789012:user/bob")) is None
    True
    """
    if requester.key == approver.key and requester.named:
        return (
            f"{approver.arn} requested {rollout} and may not decide its approvals: another person must approve or "
            "reject it"
        )
    shared_role = requester.role is not None and requester.role == approver.role
    unknown = "unknown" in (requester.kind, approver.kind)
    if requester.key == approver.key or unknown or (shared_role and not (requester.named and approver.named)):
        return (
            f"{approver.arn} and the requester {requester.arn} may be one person: {_shared(approver)}. "
            "Decide as a person AWS names: sign in through IAM Identity Center (AWSReservedSSO_* sessions carry "
            "the user), as an IAM user, or with a role of your own (a SourceIdentity on a shared role names its "
            "person only where AWS passes it on, which a function URL request does not)"
        )
    return None


def _shared(caller: Person) -> str:
    if caller.kind == "federated_user":
        return "a federated user's name is chosen by the IAM user behind it, which AWS does not show"
    if caller.kind == "unknown":
        return "the caller's ARN is not a kind this check knows"
    role = (caller.role or caller.key).rsplit("/", 1)[-1]
    return f"a session of role {role} is named by whoever assumes the role"
