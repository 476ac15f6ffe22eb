"""``endpoint create`` for people."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from fleetctl.endpoint_create import EndpointReport
from fleetctl.views.common import section, table


def render(report: EndpointReport) -> Group:
    verb = "created" if report.outcome == "created" else "exists already, kept as it is"
    head = Text(
        f"endpoint {report.endpoint_name} {verb}: {report.endpoint_status}, config {report.endpoint_config_name}"
    )
    variants = table("variant", "instance type", "instances", "AMI", "start-up / download timeout")
    for v in report.variants:
        ami = Text(v.inference_ami_version) if v.inference_ami_version else Text("none: driver 470", style="bold red")
        timeouts = f"{v.container_startup_health_check_timeout_s or '-'} s / {v.model_data_download_timeout_s or '-'} s"
        variants.add_row(v.variant_name, v.instance_type, str(v.initial_instance_count), ami, timeouts)
    targets = table("variant", "min..max", "scalable target")
    for t in report.scalable_targets:
        outcome = {
            "registered": "registered now",
            "kept": "already registered, kept",
            "not yet": "not yet: run this again once the endpoint is InService",
        }[t.outcome]
        targets.add_row(t.variant_name, f"{t.min_capacity}..{t.max_capacity}", outcome)
    created = Text("\n".join(report.created) if report.created else "nothing (all of it was there)")
    next_step = Text("next: sam deploy (README, Deploy to AWS) finds the endpoint and its scalable targets")
    return Group(
        head,
        Text(""),
        section("variants", variants),
        section("scaling", targets),
        section("created by this run", created),
        next_step,
    )
