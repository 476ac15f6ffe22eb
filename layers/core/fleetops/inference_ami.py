"""The GPU images SageMaker offers real-time endpoints, and which one runs a CUDA version without compat libraries.

fleet.yaml's ``hosting`` names one (:mod:`fleetops.config`); the container names one when its driver is too old
(``gateway.cuda_check``, through :mod:`fleetops.model_contract`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InferenceAmi:
    """One GPU image SageMaker offers for real-time endpoints (``ProductionVariant.InferenceAmiVersion``)."""

    name: str
    driver: int  # NVIDIA driver branch
    cuda: tuple[int, int]  # the highest CUDA version that driver runs without forward-compatibility libraries


#: The GPU AMIs SageMaker documents for ``InferenceAmiVersion`` (the SageMaker API reference, as botocore's service
#: model carries it), oldest first. The control plane puts one on every variant it creates (fleet.yaml's
#: ``hosting``); the container compares the driver it finds with its own CUDA and names one of these when it cannot
#: start. The ``-1`` images mount no CUDA compat libraries themselves: the container decides (gateway.cuda_check).
INFERENCE_AMIS: tuple[InferenceAmi, ...] = (
    InferenceAmi("al2-ami-sagemaker-inference-gpu-2", 535, (12, 2)),
    InferenceAmi("al2-ami-sagemaker-inference-gpu-2-1", 535, (12, 2)),
    InferenceAmi("al2-ami-sagemaker-inference-gpu-3-1", 550, (12, 4)),
    InferenceAmi("al2023-ami-sagemaker-inference-gpu-4-1", 580, (13, 0)),
)
NEWEST_INFERENCE_AMI = INFERENCE_AMIS[-1].name
