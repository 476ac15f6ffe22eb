"""Where and how a shadowed rollout captures live requests: the capture bucket, its key, the DataCaptureConfig.

Captured requests are users' conversations (history, retrieved context, session ids). They go to a bucket of
their own (``CaptureBucket`` in ``template.yaml``), never the model artifact bucket: encrypted with a key only
the model execution role (writing) and the shadow comparison (reading) may use, reachable over TLS only, and
expired by lifecycle. The rollout turns capture on for ``shadow.seconds`` after the candidate gate, off before
the comparison, which deletes what it compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetops.promotion.shadow_spec import ShadowSpec

#: Every rollout captures under ``<prefix>/<rollout id>/``; the bucket policy lets SageMaker write only here.
CAPTURE_PREFIX = "shadow-capture"


@dataclass(frozen=True)
class CaptureDestination:
    """The stack's capture bucket and the KMS key its captures are encrypted with (its ARN)."""

    bucket: str
    kms_key_arn: str


def capture_uri(destination: CaptureDestination, rollout_id: str) -> str:
    """The rollout's own capture prefix, which the comparison reads and then deletes.

    Examples
    --------
    >>> capture_uri(CaptureDestination("manga-captures", "arn:aws:kms:us-east-1:123456789012:key/k"), "v7")
    's3://manga-captures/shadow-capture/v7'
    """
    return f"s3://{destination.bucket}/{CAPTURE_PREFIX}/{rollout_id}"


def data_capture_config(spec: ShadowSpec, destination: CaptureDestination, rollout_id: str) -> dict[str, Any]:
    """CreateEndpointConfig's ``DataCaptureConfig`` for the rollout's shadow config: requests and answers, JSON.

    Examples
    --------
    >>> config = data_capture_config(
    ...     ShadowSpec(sampling_percent=10), CaptureDestination("b", "arn:aws:kms:us-east-1:1:key/k"), "v7")
    >>> config["KmsKeyId"], config["DestinationS3Uri"], config["InitialSamplingPercentage"]
    ('arn:aws:kms:us-east-1:1:key/k', 's3://b/shadow-capture/v7', 10)
    """
    return {
        "EnableCapture": True,
        "InitialSamplingPercentage": spec.sampling_percent,
        "DestinationS3Uri": capture_uri(destination, rollout_id),
        "KmsKeyId": destination.kms_key_arn,
        "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
        "CaptureContentTypeHeader": {"JsonContentTypes": ["application/json"]},
    }
