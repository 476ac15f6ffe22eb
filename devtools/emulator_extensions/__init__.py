"""AWS APIs the emulator (moto 5.2.5) lacks or gets wrong, added by this project in ONE place.

Each submodule patches moto's backends in this process (the threaded moto server runs here), so the
additions are reached over HTTP like the rest of the emulator, and responses are serialised from
botocore's real service model. Tests that rely on one of them say so.

- ``sagemaker``: UpdateEndpoint with real status transitions, variant weight 0; with a registered
  hosting (``devtools.local_sagemaker``), endpoints that run real containers and wait for their health.
- ``sagemaker_runtime``: InvokeEndpoint and InvokeEndpointWithResponseStream reaching those containers
  (inert unless a hosting is registered), each request adding SageMaker's per-variant ``AWS/SageMaker`` metrics
  (``sagemaker_metrics``: Invocations, InvocationsPerInstance, ModelLatency, the 4xx/5xx errors).
- ``application_autoscaling``: a SageMaker variant's instance count follows its scalable target's MinCapacity and
  MaxCapacity, set directly or by a scheduled action whose time has come (moto stores them and scales nothing).
- ``bedrock``: Custom Model Import (CreateModelImportJob, GetModelImportJob, ...) and Converse.
- ``cloudwatch``: percentiles (``p95``) and percentile ranks (``PR(:300)``) in GetMetricData and
  GetMetricStatistics, which moto leaves empty.
- ``stepfunctions``: the ``states:startExecution`` integration's parameter names, as AWS maps them; each
  definition parsed once, not at every execution (speed only).
- ``logs_emf``: CloudWatch Logs' EMF extraction: an EMF record put with PutLogEvents becomes CloudWatch
  datapoints (every dimension set, value arrays as samples, ``_aws.Timestamp``); invalid EMF yields none.
- ``events_lambda``: EventBridge rules with Lambda targets (moto fails PutEvents on one), invoked
  asynchronously through moto's Lambda backend; each delivery and its result are recorded.

Alarm evaluation (moto never evaluates alarms) is not an API patch: ``devtools.alarm_evaluator``.
"""

from __future__ import annotations


def install() -> None:
    """Install every extension (idempotent)."""
    from devtools.emulator_extensions import (
        application_autoscaling,
        bedrock,
        cloudwatch,
        events_lambda,
        logs_emf,
        sagemaker,
        sagemaker_runtime,
        stepfunctions,
    )

    extensions = (sagemaker, application_autoscaling, sagemaker_runtime, bedrock, cloudwatch, stepfunctions, logs_emf)
    for extension in (*extensions, events_lambda):
        extension.install()
