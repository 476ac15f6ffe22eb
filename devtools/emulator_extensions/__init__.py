"""AWS APIs the emulator (moto 5.2.5) lacks or gets wrong, added by this project in ONE place.

Each submodule patches moto's backends in this process (the threaded moto server runs here), so the
additions are reached over HTTP like the rest of the emulator, and responses are serialised from
botocore's real service model. Tests that rely on one of them say so.

- ``sagemaker``: UpdateEndpoint with real status transitions, variant weight 0.
- ``bedrock``: Custom Model Import (CreateModelImportJob, GetModelImportJob, ...) and Converse.
- ``cloudwatch``: percentile statistics (p95) in GetMetricData, which moto leaves empty.
- ``stepfunctions``: the ``states:startExecution`` integration's parameter names, as AWS maps them.
"""

from __future__ import annotations


def install() -> None:
    """Install every extension (idempotent)."""
    from devtools.emulator_extensions import bedrock, cloudwatch, sagemaker, stepfunctions

    for extension in (sagemaker, bedrock, cloudwatch, stepfunctions):
        extension.install()
