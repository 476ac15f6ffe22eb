"""The start-up CUDA check on a real driver (runs only on a GPU machine): what NVML says, and what it decides."""

from __future__ import annotations

import pynvml
import pytest

from gateway.cuda_check import COMPAT_DIR, Outcome, decide, parse_version, read_driver

pytestmark = pytest.mark.gpu


def test_the_real_driver_reports_a_cuda_version_and_a_datacenter_gpu() -> None:
    driver = read_driver(pynvml)

    assert driver.cuda is not None and driver.cuda >= (11, 0), driver
    pynvml.nvmlInit()
    try:
        names = [
            pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(pynvml.nvmlDeviceGetCount())
        ]
    finally:
        pynvml.nvmlShutdown()
    # The lent machines run data-center GPUs (H100, H200): forward compatibility is supported there.
    assert driver.datacenter, names


def test_the_decision_on_the_real_driver_follows_its_version() -> None:
    driver = read_driver(pynvml)
    assert driver.cuda is not None
    major, minor = driver.cuda

    assert decide(driver.cuda, driver, compat_present=False).outcome is Outcome.START
    assert decide((major, max(minor - 1, 0)), driver, compat_present=False).outcome is Outcome.START
    newer = decide((major + 1, 0), driver, compat_present=True)
    assert newer.outcome is Outcome.COMPAT, newer.message
    refused = decide((major + 1, 0), driver, compat_present=False)
    assert refused.outcome is Outcome.REFUSE and "InferenceAmiVersion" in refused.message


def test_torch_runs_on_what_the_check_lets_start() -> None:
    import torch  # the GPU machine has torch with CUDA

    image = parse_version(torch.version.cuda)
    decision = decide(image, read_driver(pynvml), compat_present=(COMPAT_DIR / "libcuda.so.1").exists())

    assert decision.outcome is not Outcome.REFUSE, decision.message
    assert torch.cuda.is_available(), (
        f"the check let CUDA {torch.version.cuda} start ({decision.message}) but torch cannot"
    )
