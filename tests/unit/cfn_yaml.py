"""Read CloudFormation/SAM templates in tests with the project's one loader (``devtools.cfn_yaml``).

Short tags become their long form (``!Ref X`` -> ``{"Ref": "X"}``), so a test sees what CloudFormation sees.
"""

from __future__ import annotations

from devtools.cfn_yaml import CfnLoader, load, resources_of_type
from tests.conftest import REPO

#: The main template and the nested templates it instantiates.
TEMPLATES = [REPO / "template.yaml", *sorted((REPO / "templates").glob("*.yaml"))]

__all__ = ["TEMPLATES", "CfnLoader", "load", "resources_of_type"]
