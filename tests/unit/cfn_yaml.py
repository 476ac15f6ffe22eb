"""Read CloudFormation/SAM templates in tests: a safe YAML loader that knows the short tags (!Ref, !Sub, ...).

Short tags become their long form (``!Ref X`` -> ``{"Ref": "X"}``, ``!GetAtt A.B`` -> ``{"Fn::GetAtt": ["A", "B"]}``),
so a test sees what CloudFormation sees. ``yaml.SafeLoader`` underneath: no arbitrary objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO

#: The main template and the nested templates it instantiates.
TEMPLATES = [REPO / "template.yaml", *sorted((REPO / "templates").glob("*.yaml"))]


class CfnLoader(yaml.SafeLoader):
    """SafeLoader plus CloudFormation short tags."""


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
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


CfnLoader.add_multi_constructor("!", _tag)


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.load(path.read_text(encoding="utf-8"), Loader=CfnLoader)
    return data


def resources_of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """Resources of one type by logical id (entries that are not plain resources, e.g. Fn::ForEach, are skipped)."""
    return {
        name: res
        for name, res in template.get("Resources", {}).items()
        if isinstance(res, dict) and res.get("Type") == kind
    }
