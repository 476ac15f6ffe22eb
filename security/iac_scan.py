"""IaC security scan: Checkov on each template as written and on the main template after the SAM transform.

Run by ``make iac-scan`` (and so by ``make test``) with the scanner's own environment (``.venv-iac``)::

    .venv-iac/bin/python security/iac_scan.py template.yaml templates/*.yaml

Why both forms: Checkov reads SAM resources natively, but only the transformed template shows what SAM
generates (function roles with their policy-template statements, the EventBridge rule's dead-letter queue).

A failed check is a finding. Every finding must be listed, with a reason, in ``security/accepted_findings.yaml``
(check id, the template form it shows up in, the resources as Checkov names them, ``*`` matching any characters
for a decision that holds for every resource of a type); any other finding fails the scan, and so does an
acceptance that matches no finding any more (it is stale: delete it).
Exit status: 0 clean, 1 findings or stale acceptances, 2 bad input (a template or the accepted-findings file).
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ACCEPTED = HERE / "accepted_findings.yaml"
CHECKOV = Path(sys.executable).with_name("checkov")  # the one installed beside this interpreter

# Placeholder artefact locations: the transform needs S3 locations where `sam build/package` would put them;
# the scan looks at resources and policies, never at the code.
CODE_URI = "s3://iac-scan-placeholder/code.zip"
NESTED_TEMPLATE_URL = "https://s3.amazonaws.com/iac-scan-placeholder/nested.yaml"
# Pseudo parameters the transform would otherwise ask a live AWS session for.
PSEUDO_PARAMETERS = {
    "AWS::Region": "us-east-1",
    "AWS::Partition": "aws",
    "AWS::AccountId": "123456789012",
    "AWS::StackName": "iac-scan",
    "AWS::StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/iac-scan/00000000",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::NotificationARNs": [],
}


class ScanInputError(Exception):
    """A template or the accepted-findings file cannot be read; the message says which and why."""


@dataclass(frozen=True, order=True)
class Finding:
    check: str
    form: str  # "raw" (the template as written) or "transformed" (after the SAM transform)
    template: str  # file name, e.g. template.yaml
    resource: str  # as Checkov names it: "<Type>.<LogicalId>"

    def __str__(self) -> str:
        return f"{self.check} {self.form} {self.template} {self.resource}"

    def covers(self, finding: Finding) -> bool:
        """This acceptance (its resource may be a ``*`` pattern) matches ``finding``."""
        same = (self.check, self.form, self.template) == (finding.check, finding.form, finding.template)
        return same and fnmatch.fnmatchcase(finding.resource, self.resource)


class _NoManagedPolicies:
    """The template names managed policies by ARN only; the transform must not ask IAM for a name-to-ARN map."""

    def load(self) -> dict[str, str]:
        return {}


def load_accepted(path: Path = ACCEPTED) -> dict[Finding, str]:
    """Accepted finding (its resource may be a pattern) -> reason; a malformed entry is refused with what is wrong."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ScanInputError(f"{path}: cannot read the accepted findings: {exc}") from exc
    entries = document.get("accepted") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ScanInputError(f"{path}: expected a mapping with a list under 'accepted'")
    accepted: dict[Finding, str] = {}
    for index, entry in enumerate(entries):
        where = f"{path}: accepted[{index}]"
        if not isinstance(entry, dict):
            raise ScanInputError(f"{where}: expected a mapping, got {entry!r}")
        missing = [key for key in ("check", "form", "template", "resources", "reason") if not entry.get(key)]
        if missing:
            raise ScanInputError(f"{where}: missing or empty {', '.join(missing)}")
        if entry["form"] not in ("raw", "transformed"):
            raise ScanInputError(f"{where}: form must be 'raw' or 'transformed', got {entry['form']!r}")
        if not isinstance(entry["resources"], list) or not all(isinstance(r, str) for r in entry["resources"]):
            raise ScanInputError(f"{where}: resources must be a list of '<Type>.<LogicalId>' strings")
        for resource in entry["resources"]:
            finding = Finding(str(entry["check"]), str(entry["form"]), str(entry["template"]), resource)
            if finding in accepted:
                raise ScanInputError(f"{where}: {finding} is accepted twice")
            accepted[finding] = str(entry["reason"])
    return accepted


def sam_transformed(template_path: Path) -> dict[str, Any]:
    """The template as CloudFormation receives it after ``Transform: AWS::Serverless-2016-10-31``, offline."""
    # Imported here: the translator is in the scanner's environment only, and untyped.
    yaml_parse = importlib.import_module("samtranslator.yaml_helper").yaml_parse
    transform = importlib.import_module("samtranslator.translator.transform").transform
    try:
        template: dict[str, Any] = yaml_parse(template_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ScanInputError(f"{template_path}: cannot read the template: {exc}") from exc
    for resource in template.get("Resources", {}).values():
        kind, props = resource.get("Type"), resource.setdefault("Properties", {})
        if kind == "AWS::Serverless::Function" and isinstance(props.get("CodeUri"), str):
            props["CodeUri"] = CODE_URI
        elif kind == "AWS::Serverless::LayerVersion" and isinstance(props.get("ContentUri"), str):
            props["ContentUri"] = CODE_URI
        elif kind == "AWS::Serverless::Application" and isinstance(props.get("Location"), str):
            props["Location"] = NESTED_TEMPLATE_URL  # scanned on its own as a raw template
        elif kind == "AWS::Serverless::StateMachine" and isinstance(props.get("DefinitionUri"), str):
            # Inline the definition: the state machine's own checks (logging, tracing) see the real one.
            props["Definition"] = json.loads((template_path.parent / props.pop("DefinitionUri")).read_text())
    # The transform fills pseudo parameters from a boto3 session, which needs a region even with none to call.
    os.environ.setdefault("AWS_DEFAULT_REGION", str(PSEUDO_PARAMETERS["AWS::Region"]))
    try:
        transformed: dict[str, Any] = transform(template, dict(PSEUDO_PARAMETERS), _NoManagedPolicies())
    except Exception as exc:  # the translator raises its own exception types with the problems listed
        raise ScanInputError(f"{template_path}: the SAM transform failed: {exc}") from exc
    return transformed


def checkov_failures(template_path: Path, form: str, name: str) -> tuple[list[Finding], dict[str, int]]:
    """Run Checkov on one file; its failed checks and its summary counts (passed, failed, skipped)."""
    completed = subprocess.run(  # a fixed program and arguments, no shell
        [str(CHECKOV), "--file", str(template_path), "--framework", "cloudformation", "--output", "json", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode not in (0, 1):  # 1: checks failed; anything else: the scanner itself failed
        raise ScanInputError(f"{template_path}: checkov exited {completed.returncode}: {completed.stderr[-2000:]}")
    report = json.loads(completed.stdout) if completed.stdout.strip() else {}
    reports = report if isinstance(report, list) else [report]
    findings: list[Finding] = []
    counts = {"passed": 0, "failed": 0, "skipped": 0, "parsing_errors": 0}
    for one in reports:
        summary = one.get("summary", {})
        for key in counts:
            counts[key] += int(summary.get(key, 0))
        for check in one.get("results", {}).get("failed_checks", []):
            findings.append(Finding(check["check_id"], form, name, check["resource"]))
    if counts["parsing_errors"]:
        raise ScanInputError(f"{template_path}: checkov could not parse it")
    return findings, counts


def scan(templates: list[Path], accepted: dict[Finding, str], transform_main: Path | None) -> int:
    found: list[Finding] = []
    with tempfile.TemporaryDirectory(prefix="iac-scan-") as tmp:
        targets = [(path, "raw", path.name) for path in templates]
        if transform_main is not None:
            transformed = Path(tmp) / f"{transform_main.stem}.transformed.json"
            transformed.write_text(json.dumps(sam_transformed(transform_main), indent=1), encoding="utf-8")
            targets.append((transformed, "transformed", transform_main.name))
        for path, form, name in targets:
            failures, counts = checkov_failures(path, form, name)
            found.extend(failures)
            # Checkov's "failed" checks are findings; the summary below says how many are accepted with a reason.
            print(
                f"{form:11} {name}: checks passed {counts['passed']}, "
                f"findings {counts['failed']}, skipped {counts['skipped']}"
            )
    scanned = {(form, name) for _, form, name in targets}
    unique = set(found)
    new = sorted(f for f in unique if not any(a.covers(f) for a in accepted))
    stale = sorted(a for a in accepted if (a.form, a.template) in scanned and not any(a.covers(f) for f in found))
    print(
        f"findings: {len(unique)}, of which {len(unique) - len(new)} accepted with a reason in {ACCEPTED.name}; "
        f"new {len(new)}, stale {len(stale)}: {'FAIL' if new or stale else 'ok'}"
    )
    for finding in new:
        print(f"NEW FINDING {finding}: fix it, or accept it with a reason in {ACCEPTED.name}")
    for finding in stale:
        print(f"STALE ACCEPTANCE {finding}: it no longer fails; remove it from {ACCEPTED.name}")
    return 1 if new or stale else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("templates", nargs="+", type=Path, help="templates to scan as written")
    parser.add_argument(
        "--transform", type=Path, help="a SAM template to also scan after the transform (default: the first one)"
    )
    parser.add_argument("--accepted", type=Path, default=ACCEPTED, help="the accepted-findings file")
    args = parser.parse_args(argv)
    try:
        accepted = load_accepted(args.accepted)
        return scan(args.templates, accepted, args.transform or args.templates[0])
    except ScanInputError as exc:
        print(f"iac-scan: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
