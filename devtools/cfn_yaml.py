"""Read CloudFormation/SAM templates: a safe YAML loader for the short tags, and the intrinsics parameters resolve.

Short tags become their long form (``!Ref X`` -> ``{"Ref": "X"}``, ``!GetAtt A.B`` -> ``{"Fn::GetAtt": ["A", "B"]}``),
so a reader sees what CloudFormation sees. ``yaml.SafeLoader`` underneath: no arbitrary objects.

:func:`resolve` evaluates what depends only on parameters and pseudo parameters (``Ref``, ``Fn::Sub``,
``Fn::Join``, ``Fn::Split``, ``Fn::Select``, ``Fn::If`` and the condition functions), as CloudFormation does
before it creates a resource; anything that needs a deployed resource (``Fn::GetAtt``, ``Ref`` to a resource)
raises :class:`UnresolvableError` naming it, so a caller never acts on a half-resolved value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

#: ``AWS::NoValue`` removes the property (or list item) it is the value of.
NO_VALUE = object()

_SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")


class CfnLoader(yaml.SafeLoader):
    """SafeLoader plus CloudFormation short tags."""


class UnresolvableError(ValueError):
    """The value needs something only a deployed stack has (a resource attribute, an unknown name)."""


class Deployed(str):
    """A value only a deployed stack has (``!Ref Topic`` passed to a nested stack): using it raises."""

    __slots__ = ("why",)
    why: str

    def __new__(cls, why: str) -> Deployed:
        value = super().__new__(cls, "")
        value.why = why
        return value


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        assert isinstance(node, yaml.MappingNode)
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "Condition":
        return {"Condition": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


CfnLoader.add_multi_constructor("!", _tag)


def load(path: Path) -> dict[str, Any]:
    """Parse a template file."""
    data: dict[str, Any] = yaml.load(path.read_text(encoding="utf-8"), Loader=CfnLoader)
    return data


def resources_of_type(template: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """Resources of one type by logical id (entries that are not plain resources, e.g. Fn::ForEach, are skipped)."""
    return {
        name: res
        for name, res in template.get("Resources", {}).items()
        if isinstance(res, dict) and res.get("Type") == kind
    }


def pseudo_parameters(stack_name: str) -> dict[str, str]:
    """``AWS::StackName`` and friends, as the emulated account and region have them."""
    from devtools.emulated_account import ACCOUNT_ID, REGION

    return {
        "AWS::StackName": stack_name,
        "AWS::Region": REGION,
        "AWS::AccountId": ACCOUNT_ID,
        "AWS::Partition": "aws",
        "AWS::URLSuffix": "amazonaws.com",
    }


def parameter_values(template: Mapping[str, Any], given: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each declared parameter's value: ``given`` over ``Default``, as strings (what ``Ref`` returns in CloudFormation).

    Raises
    ------
    UnresolvableError
        For a name the template does not declare, or a parameter with neither a value nor a default.
    """
    declared: Mapping[str, Any] = template.get("Parameters") or {}
    given = dict(given or {})
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise UnresolvableError(f"parameters {unknown} are not declared; the template has {sorted(declared)}")
    values: dict[str, str] = {}
    for name, spec in declared.items():
        if name in given:
            values[name] = str(given[name])
        elif "Default" in spec:
            values[name] = str(spec["Default"])
        else:
            raise UnresolvableError(f"parameter {name!r} has no value and no default")
    return values


def condition_values(template: Mapping[str, Any], refs: Mapping[str, str]) -> dict[str, bool]:
    """Evaluate the template's ``Conditions`` (they may refer to each other) with the given parameter values."""
    declared: Mapping[str, Any] = template.get("Conditions") or {}
    done: dict[str, bool] = {}

    def condition(name: str, seen: tuple[str, ...] = ()) -> bool:
        if name in seen:
            raise UnresolvableError(f"conditions refer to each other in a loop: {' -> '.join((*seen, name))}")
        if name not in declared:
            raise UnresolvableError(f"unknown condition {name!r}")
        if name not in done:
            done[name] = bool(_resolve(declared[name], refs, lambda n: condition(n, (*seen, name))))
        return done[name]

    return {name: condition(name) for name in declared}


def resolve(value: Any, refs: Mapping[str, str], conditions: Mapping[str, bool] | None = None) -> Any:
    """Evaluate the intrinsics in ``value`` that need only ``refs`` (parameters, pseudo parameters) and conditions.

    Examples
    --------
    >>> resolve({"Fn::Sub": "${Prefix}oom-${Name}"}, {"Prefix": "s-remediation-", "Name": "ep"})
    's-remediation-oom-ep'
    >>> resolve({"Fn::If": ["Big", {"Ref": "N"}, {"Ref": "AWS::NoValue"}]}, {"N": "3"}, {"Big": True})
    '3'
    """
    known = conditions or {}

    def condition(name: str) -> bool:
        if name not in known:
            raise UnresolvableError(f"unknown condition {name!r}")
        return known[name]

    return _resolve(value, refs, condition)


def _resolve(value: Any, refs: Mapping[str, str], condition: Any) -> Any:
    if isinstance(value, list):
        items = [_resolve(item, refs, condition) for item in value]
        return [item for item in items if item is not NO_VALUE]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref" or key.startswith("Fn::") or key == "Condition":
            return _intrinsic(key, arg, refs, condition)
    resolved = {k: _resolve(v, refs, condition) for k, v in value.items()}
    return {k: v for k, v in resolved.items() if v is not NO_VALUE}


def _intrinsic(key: str, arg: Any, refs: Mapping[str, str], condition: Any) -> Any:  # noqa: PLR0911
    if key == "Ref":
        return _ref(arg, refs)
    if key == "Fn::Sub":
        text, extra = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        names = {**refs, **{k: str(_resolve(v, refs, condition)) for k, v in extra.items()}}
        return _SUB_VARIABLE.sub(lambda m: _sub_variable(m.group(1), names), text)
    if key == "Fn::Join":
        separator, items = arg
        return str(separator).join(str(item) for item in _resolve(items, refs, condition))
    if key in ("Fn::Split", "Fn::Select"):
        return _list_intrinsic(key, arg, refs, condition)
    if key == "Fn::If":
        name, when_true, when_false = arg
        return _resolve(when_true if condition(name) else when_false, refs, condition)
    if key == "Condition":
        return condition(arg)
    if key == "Fn::Equals":
        left, right = (_resolve(item, refs, condition) for item in arg)
        return str(left) == str(right)
    if key == "Fn::Not":
        return not _resolve(arg[0], refs, condition)
    if key == "Fn::And":
        return all(_resolve(item, refs, condition) for item in arg)
    if key == "Fn::Or":
        return any(_resolve(item, refs, condition) for item in arg)
    raise UnresolvableError(f"{key} {arg!r} needs a deployed stack")


def _ref(name: str, refs: Mapping[str, str]) -> Any:
    if name == "AWS::NoValue":
        return NO_VALUE
    if name not in refs:
        raise UnresolvableError(f"!Ref {name} names no parameter (a resource exists only once deployed)")
    value = refs[name]
    if isinstance(value, Deployed):
        raise UnresolvableError(f"!Ref {name}: {value.why}")
    return value


def _list_intrinsic(key: str, arg: Any, refs: Mapping[str, str], condition: Any) -> Any:
    if key == "Fn::Split":
        separator, text = arg
        return str(_resolve(text, refs, condition)).split(str(separator))
    index, items = arg
    chosen = _resolve(items, refs, condition)
    if not 0 <= int(index) < len(chosen):
        raise UnresolvableError(f"Fn::Select index {index} is outside a list of {len(chosen)}")
    return chosen[int(index)]


def _sub_variable(name: str, names: Mapping[str, str]) -> str:
    if name.startswith("!"):  # ${!Literal} is the escape for a literal ${Literal}
        return "${" + name[1:] + "}"
    if name not in names:
        raise UnresolvableError(f"${{{name}}} in !Sub names no parameter (a resource attribute needs a deployed stack)")
    value = names[name]
    if isinstance(value, Deployed):
        raise UnresolvableError(f"${{{name}}} in !Sub: {value.why}")
    return value


@dataclass(frozen=True)
class StackResource:
    """A resource of a deployed stack, its own template and nested applications included, before resolution."""

    path: str  # logical ids from the top: "PrimaryVariantRemediation/QueueDepthAlarm"
    stack_name: str  # the (nested) stack that holds it
    properties: dict[str, Any]
    refs: dict[str, str]  # parameter and pseudo-parameter values in that stack
    conditions: dict[str, bool]

    def resolved(self) -> Any:
        return resolve(self.properties, self.refs, self.conditions)


def stack_resources(
    template: Path,
    kind: str,
    stack_name: str,
    parameters: Mapping[str, str] | None = None,
    resources: Mapping[str, str] | None = None,
) -> Iterator[StackResource]:
    """Every ``kind`` resource a deployment of ``template`` creates, through its local ``AWS::Serverless::Application``
    templates (parameters passed as the parent resolves them), skipping resources whose ``Condition`` is false.

    ``resources`` are what ``!Ref`` answers for top-level resources the caller created (a topic's ARN). A nested
    parameter the parent passes from any other resource is known only once deployed: a resource that uses it
    raises :class:`UnresolvableError` when resolved, the others resolve.

    Raises
    ------
    UnresolvableError
        For a parameter that is unknown or missing, or an application whose ``Location`` is not a local file.
    """
    top = load(template)
    refs = {**pseudo_parameters(stack_name), **(resources or {}), **parameter_values(top, parameters)}
    yield from _resources_in(top, kind, stack_name, refs, "")
    conditions = condition_values(top, refs)
    for app_id, app in resources_of_type(top, "AWS::Serverless::Application").items():
        if "Condition" in app and not conditions[app["Condition"]]:
            continue
        location = resolve(app["Properties"]["Location"], refs, conditions)
        if not isinstance(location, str):
            raise UnresolvableError(f"{app_id}: only a local template Location is emulated, got {location!r}")
        nested = load(template.parent / location)
        given: dict[str, str] = {}
        deployed: dict[str, Deployed] = {}
        for name, value in (app["Properties"].get("Parameters") or {}).items():
            try:
                given[name] = resolve(value, refs, conditions)
            except UnresolvableError as exc:
                given[name], deployed[name] = "", Deployed(f"{app_id} parameter {name}: {exc}")
        nested_name = f"{stack_name}-{app_id}"
        nested_refs = {**pseudo_parameters(nested_name), **parameter_values(nested, given), **deployed}
        yield from _resources_in(nested, kind, nested_name, nested_refs, f"{app_id}/")


def _resources_in(
    template: Mapping[str, Any], kind: str, stack_name: str, refs: dict[str, str], path: str
) -> Iterator[StackResource]:
    conditions = condition_values(template, refs)
    for logical_id, resource in resources_of_type(template, kind).items():
        if "Condition" in resource and not conditions[resource["Condition"]]:
            continue
        yield StackResource(f"{path}{logical_id}", stack_name, resource["Properties"], refs, conditions)
