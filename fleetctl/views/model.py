"""``model package`` for people."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from fleetctl.model_package import PackageReport
from fleetctl.views.common import section, table


def render(report: PackageReport) -> Group:
    digests = table("part", "version", "folder", "sha256")
    digests.add_row("base", "", ".", report.base_sha256)
    for a in report.adapters:
        digests.add_row(a.name, a.version, a.path, a.sha256)
    lines = [f"{report.tarball}: {report.files} files, {report.size_bytes} bytes, passes the artifact gate"]
    if report.model_data_url:
        lines.append(f"uploaded to {report.model_data_url}")
    lines.append(f"rollout request written to {report.request}")
    if report.fill_in:
        lines.append(f"fill in before starting it: {', '.join(report.fill_in)}")
    lines.append(f"then: fleetctl rollout start {report.request}")
    return Group(section("digests (the rollout request's sha256 fields)", digests), Text("\n".join(lines)))
