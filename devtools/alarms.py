"""The stack's alarms and the alarm responder's EventBridge rule on the emulator, read from the templates.

Nothing here re-declares an alarm or a pattern: :func:`template_alarms` resolves ``template.yaml`` and each
nested ``templates/*.yaml`` application it instantiates (its ``Parameters`` with ``!Sub``/``!Ref`` resolved
against the stack's parameters, the nested template's ``Conditions``) into ``PutMetricAlarm`` requests, typed
by botocore's CloudWatch model as CloudFormation types them. A changed threshold in the YAML changes the
emulated alarm. Top-level alarms are taken only when they watch the project's own namespace
(``fleetops.metrics.NAMESPACE``): the others watch ``AWS/Lambda`` and ``AWS/SQS`` metrics that the emulator
does not produce. Composite alarms (:func:`template_composite_alarms`) become ``PutCompositeAlarm`` requests, created
after the metric alarms their rules name, and their actions name the stack's SNS topics (created here unless the
caller gives their ARNs). :func:`function_rules` reads a function's ``EventBridgeRule`` events the same way.

:func:`remediation_flow` puts it together for a test: the alarms, the ``AlarmResponderFunction`` (an emulated
Lambda whose invocations run ``functions/alarm_responder/app.py`` through :mod:`devtools.lambda_dispatch`,
with the stack's environment), its rule, and an :class:`~devtools.alarm_evaluator.AlarmEvaluator`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import boto3
import botocore.session
from botocore.model import ListShape, Shape, StructureShape

from devtools import emulator_extensions
from devtools.alarm_evaluator import AlarmEvaluator, parse_expression
from devtools.alarm_rules import rule_alarms
from devtools.alarm_state import State
from devtools.cfn_yaml import (
    UnresolvableError,
    condition_values,
    load,
    parameter_values,
    pseudo_parameters,
    resolve,
    resources_of_type,
    stack_resources,
)
from devtools.emulator_extensions.events_lambda import Delivery, deliveries
from devtools.lambda_dispatch import cold_start_environment, dispatch_lambdas, load_handler_module
from devtools.remediation_stack import RemediationStack
from devtools.state_machines import create_functions, create_role
from fleetops.metrics import NAMESPACE

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "template.yaml"
RESPONDER = "AlarmResponderFunction"
RESPONDER_FOLDER = "alarm_responder"

_CLOUDWATCH = botocore.session.get_session().get_service_model("cloudwatch")
_PUT_METRIC_ALARM = cast(StructureShape, _CLOUDWATCH.operation_model("PutMetricAlarm").input_shape)
_PUT_COMPOSITE_ALARM = cast(StructureShape, _CLOUDWATCH.operation_model("PutCompositeAlarm").input_shape)


def _typed(value: Any, shape: Shape, where: str) -> Any:
    """``value`` as the API shape types it (CloudFormation passes ``"64"`` where the API takes 64)."""
    if isinstance(shape, StructureShape):
        if not isinstance(value, dict):
            raise UnresolvableError(f"{where} must be a mapping, got {value!r}")
        unknown = sorted(set(value) - set(shape.members))
        if unknown:
            raise UnresolvableError(f"{where}: {unknown} are not {shape.name} members")
        return {k: _typed(v, shape.members[k], f"{where}.{k}") for k, v in value.items()}
    if isinstance(shape, ListShape):
        return [_typed(v, shape.member, f"{where}[]") for v in value]
    converters: dict[str, Any] = {
        "integer": lambda v: int(float(v)),
        "long": lambda v: int(float(v)),
        "double": float,
        "float": float,
        "boolean": lambda v: v if isinstance(v, bool) else str(v).lower() == "true",
        "string": str,
    }
    convert = converters.get(shape.type_name)
    return convert(value) if convert else value


@dataclass(frozen=True)
class TemplateAlarm:
    """One ``AWS::CloudWatch::Alarm`` of the stack, as the ``PutMetricAlarm`` request that creates it."""

    path: str  # logical ids from the top: "PrimaryVariantRemediation/QueueDepthAlarm"
    request: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.request["AlarmName"])


def _namespaces(props: Mapping[str, Any], refs: Mapping[str, str]) -> set[str]:
    found = [props.get("Namespace")]
    found += [m["MetricStat"]["Metric"].get("Namespace") for m in props.get("Metrics") or [] if "MetricStat" in m]
    return {str(resolve(n, refs)) for n in found if n is not None}


def template_alarms(
    stack_name: str,
    parameters: Mapping[str, str] | None = None,
    template: Path = TEMPLATE,
    resources: Mapping[str, str] | None = None,
) -> list[TemplateAlarm]:
    """The alarms a deployment of ``template`` named ``stack_name`` with ``parameters`` creates, nested ones included.

    ``resources``: what ``!Ref`` answers for top-level resources (a topic's ARN), for alarms whose actions name them.

    Raises
    ------
    UnresolvableError
        When an alarm needs something only a deployed stack has, or a parameter is unknown or missing.
    """
    alarms = []
    for resource in stack_resources(template, "AWS::CloudWatch::Alarm", stack_name, parameters, resources):
        namespaces = _namespaces(resource.properties, resource.refs)
        if namespaces != {NAMESPACE}:
            logger.info(
                "alarm %s skipped: it watches %s, the emulator produces %s", resource.path, namespaces, NAMESPACE
            )
            continue
        props = resource.resolved()
        logical_id = resource.path.rsplit("/", 1)[-1]
        props.setdefault("AlarmName", f"{resource.stack_name}-{logical_id}")  # CloudFormation adds a random suffix too
        for query in props.get("Metrics") or []:
            if "Expression" in query:
                parse_expression(query["Expression"])  # refuse unsupported metric math at deployment, loudly
        alarms.append(TemplateAlarm(resource.path, _typed(props, _PUT_METRIC_ALARM, resource.path)))
    return alarms


def template_composite_alarms(
    stack_name: str,
    parameters: Mapping[str, str] | None = None,
    template: Path = TEMPLATE,
    resources: Mapping[str, str] | None = None,
) -> list[TemplateAlarm]:
    """The composite alarms of the deployment, as ``PutCompositeAlarm`` requests (rules the emulator cannot
    evaluate are refused here, loudly).

    Raises
    ------
    UnresolvableError
        When one needs something only a deployed stack has (a topic not in ``resources``).
    """
    alarms = []
    for resource in stack_resources(template, "AWS::CloudWatch::CompositeAlarm", stack_name, parameters, resources):
        props = resource.resolved()
        rule_alarms(props["AlarmRule"])
        alarms.append(TemplateAlarm(resource.path, _typed(props, _PUT_COMPOSITE_ALARM, resource.path)))
    return alarms


def create_topics(stack_name: str, template: Path = TEMPLATE) -> dict[str, str]:
    """Create the template's top-level SNS topics on the emulator (``<stack>-<LogicalId>``); logical id -> ARN."""
    sns = boto3.client("sns")
    return {
        logical_id: str(sns.create_topic(Name=f"{stack_name}-{logical_id}")["TopicArn"])
        for logical_id in resources_of_type(load(template), "AWS::SNS::Topic")
    }


def create_alarms(
    stack_name: str, parameters: Mapping[str, str] | None = None, resources: Mapping[str, str] | None = None
) -> list[str]:
    """Create every alarm of :func:`template_alarms`, then every :func:`template_composite_alarms` (CloudFormation's
    ``DependsOn``), on the emulator; returns their names.

    ``resources`` gives the ARNs of topics the caller created (``{"OperationsTopic": arn}``); the template's other
    topics are created by :func:`create_topics`.
    """
    given = dict(resources or {})
    resources = {**{k: v for k, v in create_topics(stack_name).items() if k not in given}, **given}
    cloudwatch = boto3.client("cloudwatch")
    alarms = template_alarms(stack_name, parameters, resources=resources)
    for alarm in alarms:
        cloudwatch.put_metric_alarm(**alarm.request)
    composites = template_composite_alarms(stack_name, parameters, resources=resources)
    for composite in composites:
        cloudwatch.put_composite_alarm(**composite.request)
    return [alarm.name for alarm in alarms + composites]


@dataclass(frozen=True)
class RuleSpec:
    """An ``EventBridgeRule`` event of a SAM function, resolved: the rule and its target (without the ARN)."""

    name: str
    pattern: dict[str, Any]
    event_bus: str
    state: str
    target: dict[str, Any]


def function_rules(
    stack_name: str, function_id: str, parameters: Mapping[str, str] | None = None, template: Path = TEMPLATE
) -> list[RuleSpec]:
    """The rules SAM creates for ``function_id``'s ``EventBridgeRule`` events.

    Names follow SAM (``<stack>-<Function><Event>``, without SAM's random suffix) as does the target id
    (``<Function><Event>LambdaTarget``). ``DeadLetterConfig`` (a queue SAM creates) is left out.
    """
    top = load(template)
    refs = {**pseudo_parameters(stack_name), **parameter_values(top, parameters)}
    conditions = condition_values(top, refs)
    events = top["Resources"][function_id]["Properties"].get("Events") or {}
    rules = []
    for event_id, event in events.items():
        if event.get("Type") != "EventBridgeRule":
            continue
        props = resolve({k: v for k, v in event["Properties"].items() if k != "DeadLetterConfig"}, refs, conditions)
        target = {"Id": (props.get("Target") or {}).get("Id", f"{function_id}{event_id}LambdaTarget")}
        target.update({k: props[k] for k in ("Input", "InputPath", "InputTransformer", "RetryPolicy") if k in props})
        rules.append(
            RuleSpec(
                name=props.get("RuleName") or f"{stack_name}-{function_id}{event_id}"[:64],
                pattern=props["Pattern"],
                event_bus=props.get("EventBusName", "default"),
                state=props.get("State") or ("DISABLED" if props.get("Enabled") is False else "ENABLED"),
                target=target,
            )
        )
    return rules


def create_function_rules(
    stack_name: str, function_id: str, function_arn: str, parameters: Mapping[str, str] | None = None
) -> list[str]:
    """Create :func:`function_rules` on the emulator with ``function_arn`` as target; returns the rule ARNs."""
    events = boto3.client("events")
    arns = []
    for rule in function_rules(stack_name, function_id, parameters):
        arns.append(
            events.put_rule(
                Name=rule.name, EventPattern=json.dumps(rule.pattern), State=rule.state, EventBusName=rule.event_bus
            )["RuleArn"]
        )
        events.put_targets(Rule=rule.name, EventBusName=rule.event_bus, Targets=[{**rule.target, "Arn": function_arn}])
    return arns


@dataclass(frozen=True)
class RemediationFlow:
    """What :func:`remediation_flow` deployed, and the waits a test needs."""

    stack: RemediationStack
    endpoint_name: str
    alarm_names: list[str]
    function_name: str
    function_arn: str
    rule_arns: list[str]
    evaluator: AlarmEvaluator

    def alarm(self, kind: str, variant: str) -> str:
        """The name of the stack's ``kind`` alarm of ``variant`` (it must be one the templates created)."""
        name = f"{self.stack.prefix}{kind}-{self.endpoint_name}-{variant}"
        if name not in self.alarm_names:
            raise KeyError(f"no alarm {name!r}; the templates created {self.alarm_names}")
        return name

    def handled(self, alarm_name: str, state: State, timeout_s: float = 30.0) -> Delivery:
        """The responder's finished invocation for ``alarm_name``'s transition into ``state`` (bounded wait)."""
        return deliveries.wait(
            lambda d: d.function_name == self.function_name and d.alarm_name == alarm_name and d.alarm_state == state,
            timeout_s,
        )


@contextmanager
def remediation_flow(
    stack: RemediationStack,
    stack_name: str,
    *,
    parameters: Mapping[str, str] | None = None,
    time_scale: float = 20.0,
    settle_timeout_s: float = 60.0,
) -> Iterator[RemediationFlow]:
    """Deploy the stack's alarms, the responder function and its rule, and evaluate the alarms, for the duration.

    ``stack`` is the emulated world of :func:`devtools.remediation_stack.create_remediation_stack` (tables,
    topic, endpoint) for ``stack_name``; ``parameters`` are ``template.yaml`` parameters (defaults otherwise).
    On entry every alarm has been evaluated once (AWS's first INSUFFICIENT_DATA -> OK transitions included) and
    the responder has handled those events, so a test starts from a settled stack. On exit the evaluator stops
    and the deliveries still running finish (bounded), then the environment is restored.

    Examples
    --------
    >>> with remediation_flow(stack, "manga-llm-fleet-prod", time_scale=30) as flow:  # doctest: +SKIP
    ...     put_log_events(emf_lines_with_queue_depth_180)  # the container's stdout, as SageMaker ships it
    ...     name = flow.alarm("queue-depth", "primary")
    ...     flow.evaluator.wait_for(name, "ALARM", timeout_s=20).reason
    ...     flow.handled(name, "ALARM").result["status"]
    'Threshold Crossed: 1 out of the last 1 datapoints [180.0 (...)] was greater than the threshold (50.0) ...'
    'handled'
    """
    emulator_extensions.install()
    top = load(TEMPLATE)
    refs = {**pseudo_parameters(stack_name), **parameter_values(top, parameters)}
    variables = top["Resources"][RESPONDER]["Properties"]["Environment"]["Variables"]
    prefix = resolve(variables["ALARM_NAME_PREFIX"], refs)
    if prefix != stack.prefix:
        raise ValueError(f"the template gives the responder the prefix {prefix!r}, the stack has {stack.prefix!r}")
    function_name = f"{stack_name}-{RESPONDER}"
    function_arn = create_functions([function_name], create_role(f"{stack_name}-alarm-responder"))[function_name]
    environment = stack.environment()
    boto3.client("lambda").update_function_configuration(
        FunctionName=function_name, Environment={"Variables": environment}
    )
    alarm_names = create_alarms(stack_name, parameters, {"OperationsTopic": stack.core.topic_arn})
    rule_arns = create_function_rules(stack_name, RESPONDER, function_arn, parameters)
    deliveries.clear()
    evaluator = AlarmEvaluator(time_scale=time_scale)
    with (
        cold_start_environment(environment, [RESPONDER_FOLDER]),
        dispatch_lambdas({function_name: RESPONDER_FOLDER}),
    ):
        load_handler_module(RESPONDER_FOLDER)  # the cold start, here: a bad environment fails the deployment
        flow = RemediationFlow(
            stack=stack,
            endpoint_name=refs["RemediatedEndpointName"],
            alarm_names=alarm_names,
            function_name=function_name,
            function_arn=function_arn,
            rule_arns=rule_arns,
            evaluator=evaluator,
        )
        evaluator.start()
        try:
            evaluator.wait_evaluated(alarm_names, after=0.0, timeout_s=settle_timeout_s)
            deliveries.idle(settle_timeout_s)
            yield flow
        finally:
            evaluator.stop()
            try:
                deliveries.idle(settle_timeout_s)
            except TimeoutError:
                logger.exception("responder invocations still running at the end of the remediation flow")
