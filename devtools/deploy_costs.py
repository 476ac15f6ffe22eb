"""What the shipped configuration costs a month: GPU instances at each variant's floor and cap (fleet.yaml's
``price_per_instance_hour``), the templates' CloudWatch alarms and the gateway's custom metrics.

Rendered into the README's deploy section (block ``deploy-costs``, ``make readme-bench``), so the table follows
fleet.yaml and the templates; ``tests/unit/test_readme_bench.py`` fails while they differ. Prices are AWS's
us-east-1 list prices at the time of writing, named below; check your region and any savings plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools import cfn_yaml
from fleetops.config import load_fleet_config
from fleetops.metrics import MetricName

REPO = Path(__file__).resolve().parents[1]
FLEET = REPO / "layers" / "core" / "fleet_config" / "fleet.yaml"
HOURS_PER_MONTH = 730
#: CloudWatch list prices, us-east-1, per month: an alarm's metric at standard (60 s and longer) and high
#: resolution, a composite alarm, a custom metric (first 10,000).
ALARM_METRIC_USD = 0.10
HIGH_RESOLUTION_ALARM_METRIC_USD = 0.30
COMPOSITE_ALARM_USD = 0.50
CUSTOM_METRIC_USD = 0.30


@dataclass(frozen=True)
class AlarmCost:
    metric_alarms: int
    alarm_metrics: int
    composite_alarms: int
    usd_per_month: float


def alarm_cost(template: dict[str, Any]) -> AlarmCost:
    """One template's alarms: each metric queried by a metric alarm is billed, a composite alarm once."""
    alarms = cfn_yaml.resources_of_type(template, "AWS::CloudWatch::Alarm")
    composites = cfn_yaml.resources_of_type(template, "AWS::CloudWatch::CompositeAlarm")
    metrics = usd = 0.0
    for alarm in alarms.values():
        props = alarm["Properties"]
        queried = [m["MetricStat"] for m in props.get("Metrics", []) if "MetricStat" in m] or [props]
        for stat in queried:
            period = stat.get("Period", 60)
            metrics += 1
            high = isinstance(period, int) and period < 60
            usd += HIGH_RESOLUTION_ALARM_METRIC_USD if high else ALARM_METRIC_USD
    usd += COMPOSITE_ALARM_USD * len(composites)
    return AlarmCost(len(alarms), int(metrics), len(composites), usd)


def _money(value: float) -> str:
    return f"${value:,.0f}" if value >= 100 else f"${value:,.2f}"


def render(_results: Path | None = None) -> str:
    """The README's cost table (the argument is the readme_bench renderers' results folder, unused here)."""
    fleet = load_fleet_config(FLEET)
    lines = [
        "| endpoint (environment) | variant | instance | floor | cap | $/instance-hour | a month at the floor "
        "| a month at the cap |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for endpoint in fleet.endpoints:
        for v in endpoint.variants:
            price = v.price_per_instance_hour
            costs = (
                f"{price:.2f} | {_money(v.floor * price * HOURS_PER_MONTH)} | {_money(v.cap * price * HOURS_PER_MONTH)}"
                if price is not None
                else "(no price_per_instance_hour in fleet.yaml) | | "
            )
            lines.append(
                f"| {endpoint.name} ({endpoint.environment}) | {v.name} | {v.instance_type} | {v.floor} | {v.cap} | "
                f"{costs} |"
            )
    stack = alarm_cost(cfn_yaml.load(REPO / "template.yaml"))
    per_variant = alarm_cost(cfn_yaml.load(REPO / "templates" / "variant_remediation.yaml"))
    alarms_usd = stack.usd_per_month + 2 * per_variant.usd_per_month  # a stack watches its primary and canary
    metrics = len(MetricName) * 2
    queried = stack.alarm_metrics + 2 * per_variant.alarm_metrics
    return "\n".join(
        [
            *lines,
            "",
            f"One stack's CloudWatch alarms (primary and canary variant): {stack.metric_alarms} + "
            f"2 x {per_variant.metric_alarms} metric alarms querying {queried}"
            f" metrics, {stack.composite_alarms + 2 * per_variant.composite_alarms} composite alarms: about "
            f"{_money(alarms_usd)} a month. The gateway's custom metrics: {len(MetricName)} names per variant "
            f"({metrics} for two variants, about {_money(metrics * CUSTOM_METRIC_USD)} a month), more with the "
            f"per-adapter and per-version series. Lambda, Step Functions, DynamoDB and SNS at this traffic: a few "
            f"dollars. Prices: us-east-1 list prices, {HOURS_PER_MONTH} hours a month.",
        ]
    )
