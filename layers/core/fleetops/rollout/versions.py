"""Versioned adapters: a release is one base model version and one version of each LoRA adapter, each checksummed.

Adapters are versioned independently of the base model. Every adapter version is an immutable folder of its
own inside the model artifact (e.g. ``adapters/manga_domain/v4``) with the sha256 of its files, so the model
pointer and the registry can name exactly what serves, and a rollback of one adapter is a pointer change back
to the release that served before. Nothing here calls AWS.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator

from fleetops.validation import StrictModel

#: A sha256 as ``sha256sum`` prints it: 64 lowercase hex digits.
SHA256_PATTERN = r"^[0-9a-f]{64}$"
VERSION_PATTERN = r"^[A-Za-z0-9._-]+$"


def sha256_problem(value: object) -> str | None:
    """Why ``value`` is not a sha256 (64 lowercase hex digits), or ``None``.

    Examples
    --------
    >>> sha256_problem("ab" * 32) is None
    True
    >>> sha256_problem("abc")
    "sha256 'abc' is not 64 lowercase hex digits (sha256sum of the artifact)"
    """
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return None
    return f"sha256 {value!r} is not 64 lowercase hex digits (sha256sum of the artifact)"


class AdapterVersion(StrictModel):
    """One immutable version of a LoRA adapter: its folder inside the model artifact and the checksum of its files."""

    version: str = Field(min_length=1, max_length=64, pattern=VERSION_PATTERN)
    path: str = Field(min_length=1, description="folder inside the model artifact (LORA_MODULES), one per version")
    sha256: str = Field(description="the artifact gate's digest of the adapter's folder (its sha256sum listing)")

    @field_validator("sha256")
    @classmethod
    def _sha256(cls, value: str) -> str:
        problem = sha256_problem(value)
        if problem:
            raise ValueError(problem)
        return value


def adapter_entry_problems(adapters: object) -> list[str]:
    """Each adapter entry that is not ``{version, path, sha256}`` with a valid sha256, named by its adapter.

    Checked before the field is parsed, so that the message names the adapter rather than a field path, and a
    request in the older ``name -> path`` form is told what to send instead.

    Examples
    --------
    >>> adapter_entry_problems({"jp_style": "adapters/jp_style"})  # doctest: +ELLIPSIS
    ["adapter 'jp_style': expected {version, path, sha256}, got a path ...
    >>> adapter_entry_problems({"jp_style": {"version": "v2", "path": "adapters/jp_style/v2"}})
    ["adapter 'jp_style': sha256 is missing (64 lowercase hex digits: sha256sum of the adapter's files)"]
    """
    if not isinstance(adapters, Mapping):
        return []  # the field's own validation names the type
    found = []
    for name, entry in adapters.items():
        if isinstance(entry, str):
            found.append(
                f"adapter {name!r}: expected {{version, path, sha256}}, got a path {entry!r} (adapters are "
                "versioned: name the version, its folder and the sha256 of its files)"
            )
        elif isinstance(entry, Mapping) and "sha256" not in entry:
            found.append(
                f"adapter {name!r}: sha256 is missing (64 lowercase hex digits: sha256sum of the adapter's files)"
            )
        elif isinstance(entry, Mapping) and (problem := sha256_problem(entry["sha256"])):
            found.append(f"adapter {name!r}: {problem}")
    return found


class Release(StrictModel):
    """What serves: the base model (name, version, sha256) and each adapter's version (``None``: image default)."""

    model: str
    version: str
    sha256: str | None = Field(default=None, description="None only in a pointer written before checksums")
    adapters: dict[str, AdapterVersion] | None = None

    def same_base(self, other: Release) -> bool:
        return (self.model, self.version, self.sha256) == (other.model, other.version, other.sha256)

    def release_key(self) -> str:
        """The registry sort key of this release: the base version, plus a digest of the adapter set if any.

        Two releases on one base with other adapter versions get two rows, each immutable: the same key
        always means the same base and adapters, so writing a row again changes nothing.

        Examples
        --------
        >>> Release(model="m", version="v7", sha256="a" * 64).release_key()
        'v7'
        >>> one = AdapterVersion(version="v4", path="adapters/jp/v4", sha256="b" * 64)
        >>> Release(model="m", version="v7", sha256="a" * 64, adapters={"jp": one}).release_key()
        'v7+adapters-b0a5d5be53a6'
        """
        if self.adapters is None:
            return self.version
        canonical = json.dumps({n: a.model_dump(mode="json") for n, a in self.adapters.items()}, sort_keys=True)
        return f"{self.version}+adapters-{hashlib.sha256(canonical.encode()).hexdigest()[:12]}"


class ReleaseChange(StrictModel):
    """How a rollout's release differs from the one the pointer names: the plan, summary and audit say so."""

    kind: Literal["first", "base", "adapters-only", "unchanged"]
    adapters_changed: tuple[str, ...] = Field(description="adapters added, removed or at another version/sha256")
    summary: str


def _adapter_version(adapters: Mapping[str, AdapterVersion] | None, name: str) -> str:
    entry = (adapters or {}).get(name)
    return entry.version if entry else "none"


def release_change(current: Release | None, new: Release) -> ReleaseChange:
    """Compare the release a rollout ships with the one the pointer names.

    Examples
    --------
    >>> v3 = AdapterVersion(version="v3", path="adapters/jp/v3", sha256="b" * 64)
    >>> v4 = AdapterVersion(version="v4", path="adapters/jp/v4", sha256="c" * 64)
    >>> old = Release(model="m", version="v7", sha256="a" * 64, adapters={"jp": v3})
    >>> release_change(old, old.model_copy(update={"adapters": {"jp": v4}})).summary
    'adapter-only change: jp v3 -> v4; base m v7 unchanged'
    """
    if current is None:
        return ReleaseChange(kind="first", adapters_changed=(), summary=f"first release: {new.model} {new.version}")
    names = sorted(set(current.adapters or {}) | set(new.adapters or {}))
    changed = tuple(n for n in names if (current.adapters or {}).get(n) != (new.adapters or {}).get(n))
    moves = ", ".join(
        f"{n} {_adapter_version(current.adapters, n)} -> {_adapter_version(new.adapters, n)}" for n in changed
    )
    if not new.same_base(current):
        summary = f"base change: {current.model} {current.version} -> {new.model} {new.version}"
        if moves:
            summary += f"; adapters {moves}"
        return ReleaseChange(kind="base", adapters_changed=changed, summary=summary)
    if changed or (current.adapters is None) != (new.adapters is None):
        summary = f"adapter-only change: {moves or 'the image default set'}; base {new.model} {new.version} unchanged"
        return ReleaseChange(kind="adapters-only", adapters_changed=changed, summary=summary)
    return ReleaseChange(kind="unchanged", adapters_changed=(), summary=f"same release {new.model} {new.version}")


def registry_adapters(adapters: Mapping[str, AdapterVersion] | None) -> dict[str, Any]:
    """The adapters as a DynamoDB ``M`` attribute value: name -> {version, path, sha256}.

    Examples
    --------
    >>> jp = AdapterVersion(version="v4", path="adapters/jp/v4", sha256="c" * 64)
    >>> registry_adapters({"jp": jp})["M"]["jp"]["M"]["version"]
    {'S': 'v4'}
    """
    return {
        "M": {
            name: {"M": {key: {"S": value} for key, value in entry.model_dump(mode="json").items()}}
            for name, entry in sorted((adapters or {}).items())
        }
    }
