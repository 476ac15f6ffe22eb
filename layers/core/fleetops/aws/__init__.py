"""Shared infrastructure: the boto3 client factory, the wait-out-an-update retry and the adapters several
capabilities use (audit table, lease, kill switch, notifier, Application Auto Scaling, the SageMaker endpoint).

It imports no capability package (an import-linter contract in pyproject.toml); a capability's own adapters
live in that capability's package.
"""
