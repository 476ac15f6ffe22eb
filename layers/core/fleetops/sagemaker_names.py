"""SageMaker's naming rules the project checks before it calls SageMaker: resource names and instance types."""

from __future__ import annotations

#: A SageMaker resource name (endpoint, config, model, variant): alphanumerics and hyphens.
NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$"
#: The longest SageMaker resource name.
MAX_NAME = 63
#: A SageMaker instance type (``ml.g5.2xlarge``), as a rollout's canary names it.
INSTANCE_TYPE_PATTERN = r"^ml\.[a-z0-9-]+\.[a-z0-9]+$"
