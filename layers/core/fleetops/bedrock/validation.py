"""Check import artifacts before an import job spends money; report every problem at once."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Protocol

from fleetops.bedrock import rules
from fleetops.bedrock.models import ArtifactObject, ImportPlan, ImportRequest


class ArtifactValidationError(Exception):
    """The artifacts cannot be imported; the message lists every problem found."""

    def __init__(self, uri: str, problems: list[str]):
        self.uri = uri
        self.problems = problems
        listed = "; ".join(f"({i}) {p}" for i, p in enumerate(problems, start=1))
        super().__init__(f"{len(problems)} problem(s) with {uri}: {listed}")


class ArtifactStore(Protocol):
    """Read access to the artifact prefix (S3 in production, a dict in unit tests)."""

    def list_objects(self, bucket: str, prefix: str) -> list[ArtifactObject]: ...

    def read_text(self, bucket: str, key: str) -> str: ...


def poll_schedule(initial_s: int, max_s: int, max_polls: int) -> tuple[int, ...]:
    """Seconds to wait before each GetModelImportJob call: doubling from ``initial_s``, capped at ``max_s``.

    Examples
    --------
    >>> poll_schedule(30, 100, 5)
    (30, 60, 100, 100, 100)
    """
    return tuple(min(initial_s * 2**i, max_s) for i in range(max_polls))


def within(request: ImportRequest, allowed_root: str) -> bool:
    """True when the request's artifacts lie under ``allowed_root`` (``s3://bucket/`` or ``s3://bucket/prefix/``).

    Examples
    --------
    >>> r = ImportRequest(import_id="a1", model_name="m", version="1", artifacts_s3_uri="s3://bkt/imports/m/")
    >>> within(r, "s3://bkt/imports/"), within(r, "s3://bkt/other/"), within(r, "s3://bk/")
    (True, False, False)
    """
    root = allowed_root if allowed_root.endswith("/") else allowed_root + "/"
    return request.artifacts_s3_uri.startswith(root)


def _safe_name(text: str) -> str:
    # Bedrock model names allow letters, digits and single '-'/'_' separators.
    return re.sub(r"[^0-9a-zA-Z]+", "-", text).strip("-")


def client_token(request: ImportRequest) -> str:
    """Deterministic idempotency token: the same request gives the same token, a changed one a new token.

    Examples
    --------
    >>> r = ImportRequest(import_id="a1", model_name="m", version="1", artifacts_s3_uri="s3://bkt/x/")
    >>> client_token(r) == client_token(r)
    True
    """
    fields = request.model_dump(include={"import_id", "model_name", "version", "artifacts_s3_uri"})
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:48]


def _architecture(config_text: str | None, problems: list[str]) -> str | None:
    if config_text is None:
        return None
    try:
        config: Any = json.loads(config_text)
    except json.JSONDecodeError as exc:
        problems.append(f"{rules.CONFIG_FILE} is not valid JSON ({exc.msg} at line {exc.lineno})")
        return None
    archs = config.get("architectures") if isinstance(config, dict) else None
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        problems.append(f'{rules.CONFIG_FILE} has no "architectures" list naming the model class')
        return None
    arch = archs[0]
    if arch not in rules.SUPPORTED_ARCHITECTURES:
        supported = ", ".join(sorted(rules.SUPPORTED_ARCHITECTURES))
        problems.append(f"architecture {arch!r} is not supported by Custom Model Import (supported: {supported})")
    return arch


def _file_problems(files: dict[str, int]) -> list[str]:
    problems: list[str] = []
    if rules.CONFIG_FILE not in files:
        problems.append(f"{rules.CONFIG_FILE} is missing")
    if rules.TOKENIZER_CONFIG_FILE not in files:
        problems.append(f"{rules.TOKENIZER_CONFIG_FILE} is missing")
    if not any(name in files for name in rules.TOKENIZER_FILES):
        problems.append(f"no tokenizer: need {' or '.join(rules.TOKENIZER_FILES)}")
    weights = {n: s for n, s in files.items() if n.endswith(rules.WEIGHTS_SUFFIX)}
    if not weights:
        problems.append(f"no *{rules.WEIGHTS_SUFFIX} weights (Hugging Face safetensors format is required)")
    problems.extend(f"{name} is empty (0 bytes)" for name, size in sorted(weights.items()) if size == 0)
    return problems


def check_artifacts(
    request: ImportRequest, objects: list[ArtifactObject], config_text: str | None, *, allowed_root: str
) -> ImportPlan:
    """Apply every rule and return the plan, or raise :class:`ArtifactValidationError` listing all problems.

    ``allowed_root`` is the only S3 location imports may read (``s3://bucket/prefix/``, the import
    role's scope). ``objects`` are the objects under the prefix (names relative to it); ``config_text`` is the content
    of ``config.json`` when it exists. Files must sit directly under the prefix, as Bedrock reads them.

    Examples
    --------
    >>> r = ImportRequest(import_id="a1", model_name="m", version="1", artifacts_s3_uri="s3://bkt/x/")
    >>> check_artifacts(r, [], None, allowed_root="s3://bkt/")
    Traceback (most recent call last):
    ...
    fleetops.bedrock.validation.ArtifactValidationError: 1 problem(s) with s3://bkt/x/: (1) no objects under s3://bkt/x/
    """
    uri = request.artifacts_s3_uri
    if not within(request, allowed_root):
        # Nothing else is checked: the import role may only read the project's own artifact prefix.
        raise ArtifactValidationError(uri, [f"artifacts must be under {allowed_root}, not {uri}"])
    if not objects:
        raise ArtifactValidationError(uri, [f"no objects under {uri}"])
    problems: list[str] = []
    files = {o.name: o.size for o in objects if "/" not in o.name}
    problems.extend(_file_problems(files))
    arch = _architecture(config_text, problems)
    rule = rules.SUPPORTED_ARCHITECTURES.get(arch or "")
    total = sum(o.size for o in objects)
    limit = rule.max_total_bytes if rule else max(r.max_total_bytes for r in rules.SUPPORTED_ARCHITECTURES.values())
    if total > limit:
        problems.append(f"total size {total / rules.GIB:.1f} GiB exceeds the {limit / rules.GIB:.0f} GiB import limit")
    if problems:
        raise ArtifactValidationError(uri, problems)
    assert rule is not None and arch is not None  # no problems means a supported architecture was read
    warnings = [
        f"{name} is ignored: only *{rules.WEIGHTS_SUFFIX} weights are imported"
        for name in sorted(files)
        if name.endswith(rules.UNSUPPORTED_WEIGHT_SUFFIXES)
    ]
    if not rule.converse:
        warnings.append(f"{rule.family} models do not support Converse: the smoke test will be skipped")
    return ImportPlan(
        import_id=request.import_id,
        model_name=request.model_name,
        version=request.version,
        artifacts_s3_uri=uri,
        job_name=f"fleetops-{request.import_id}",
        imported_model_name=_safe_name(f"{request.model_name}-{request.version}")[:63],
        client_request_token=client_token(request),
        architecture=arch,
        family=rule.family,
        converse_supported=rule.converse,
        total_bytes=total,
        weight_files=sum(1 for n in files if n.endswith(rules.WEIGHTS_SUFFIX)),
        prompts=request.prompts,
        max_tokens=request.max_tokens,
        poll_waits=poll_schedule(request.poll_initial_seconds, request.poll_max_seconds, request.max_polls),
        warnings=tuple(warnings),
    )


def inspect_artifacts(request: ImportRequest, store: ArtifactStore, *, allowed_root: str) -> ImportPlan:
    """List the prefix, read ``config.json`` if it is there and small, and check everything.

    Examples
    --------
    >>> class Empty:
    ...     def list_objects(self, bucket, prefix): return []
    ...     def read_text(self, bucket, key): raise KeyError(key)
    >>> r = ImportRequest(import_id="a1", model_name="m", version="1", artifacts_s3_uri="s3://bkt/x/")
    >>> inspect_artifacts(r, Empty(), allowed_root="s3://bkt/")
    Traceback (most recent call last):
    ...
    fleetops.bedrock.validation.ArtifactValidationError: 1 problem(s) with s3://bkt/x/: (1) no objects under s3://bkt/x/
    """
    objects = store.list_objects(request.bucket, request.prefix) if within(request, allowed_root) else []
    sizes = {o.name: o.size for o in objects}
    config_text = None
    if sizes.get(rules.CONFIG_FILE, rules.MAX_CONFIG_BYTES + 1) <= rules.MAX_CONFIG_BYTES:
        config_text = store.read_text(request.bucket, request.prefix + rules.CONFIG_FILE)
    elif rules.CONFIG_FILE in sizes:
        raise ArtifactValidationError(request.artifacts_s3_uri, [f"{rules.CONFIG_FILE} is larger than 1 MiB"])
    return check_artifacts(request, objects, config_text, allowed_root=allowed_root)
