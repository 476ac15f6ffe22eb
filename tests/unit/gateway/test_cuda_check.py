"""The start-up check of the NVIDIA driver against the image's CUDA: start, start with the compat libraries, or
refuse naming the InferenceAmiVersion to choose. Driver versions are faked (no GPU here); ``tests/gpu`` reads a
real one."""

from __future__ import annotations

import inspect
import logging
import sys
from pathlib import Path
from typing import Any

import pynvml
import pytest

from fleetops.inference_ami import INFERENCE_AMIS
from gateway import __main__ as entrypoint
from gateway.cuda_check import Driver, Outcome, at_start, decide, read_driver

SAGEMAKER_DEFAULT = Driver(cuda=(11, 4))  # no InferenceAmiVersion: driver 470


class FakeNvml:
    """Test double of the ``pynvml`` module: the calls :func:`gateway.cuda_check.read_driver` makes, with
    pynvml's own exception class and brand constants (no GPU on this machine)."""

    NVMLError = pynvml.NVMLError

    def __init__(self, cuda: int | None, brands: tuple[int, ...] = (pynvml.NVML_BRAND_NVIDIA,)) -> None:
        self.cuda = cuda
        self.brands = brands
        self.shut_down = False
        for name in dir(pynvml):
            if name.startswith("NVML_BRAND_"):
                setattr(self, name, getattr(pynvml, name))

    def nvmlInit(self) -> None:
        if self.cuda is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        assert self.cuda is not None
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        return len(self.brands)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetBrand(self, handle: int) -> int:
        return self.brands[handle]


def test_the_double_calls_exist_in_pynvml_with_the_same_parameters() -> None:
    for name in ("nvmlSystemGetCudaDriverVersion", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex"):
        assert len(inspect.signature(getattr(pynvml, name)).parameters) == len(
            inspect.signature(getattr(FakeNvml(12040), name)).parameters
        ), name
    assert callable(pynvml.nvmlDeviceGetBrand)


def test_a_driver_as_new_as_the_image_starts() -> None:
    decision = decide((12, 4), Driver(cuda=(12, 4)), compat_present=False)

    assert decision.outcome is Outcome.START
    assert decision.message == "the NVIDIA driver runs CUDA 12.4; the image needs 12.4"
    assert decide((12, 4), Driver(cuda=(13, 0)), compat_present=True).outcome is Outcome.START  # compat not used


def test_an_older_driver_on_a_datacenter_gpu_starts_with_the_compat_libraries() -> None:
    decision = decide((12, 9), SAGEMAKER_DEFAULT, compat_present=True)

    assert decision.outcome is Outcome.COMPAT
    assert "CUDA 11.4, older than the image's 12.9" in decision.message
    assert "/usr/local/cuda/compat first on LD_LIBRARY_PATH" in decision.message


def test_sagemakers_default_driver_without_compat_libraries_is_refused_naming_the_ami() -> None:
    decision = decide((12, 4), SAGEMAKER_DEFAULT, compat_present=False)

    assert decision.outcome is Outcome.REFUSE
    assert decision.message == (
        "the NVIDIA driver runs CUDA 11.4 (SageMaker's default AMI), the image needs CUDA 12.4 (the image has no "
        "forward-compatibility libraries in /usr/local/cuda/compat): choose InferenceAmiVersion "
        "al2-ami-sagemaker-inference-gpu-3-1 (driver 550, CUDA 12.4) in fleet.yaml's hosting for this endpoint and "
        "create its endpoint config again"
    )


@pytest.mark.parametrize(
    ("image", "driver", "why", "ami"),
    [
        # A consumer card: forward compatibility is not supported there, compat libraries or not.
        (
            (12, 4),
            Driver(cuda=(11, 4), datacenter=False),
            "a GeForce or Titan GPU",
            "al2-ami-sagemaker-inference-gpu-3-1",
        ),
        # Two major versions apart: no compat package bridges them.
        (
            (13, 0),
            SAGEMAKER_DEFAULT,
            "one major version back, not from CUDA 11.4",
            "al2023-ami-sagemaker-inference-gpu-4-1",
        ),
    ],
)
def test_compat_libraries_do_not_help_on_a_consumer_gpu_or_across_two_majors(
    image: tuple[int, int], driver: Driver, why: str, ami: str
) -> None:
    decision = decide(image, driver, compat_present=True)

    assert decision.outcome is Outcome.REFUSE
    assert why in decision.message and f"choose InferenceAmiVersion {ami} " in decision.message


def test_the_same_major_without_compat_libraries_starts_under_minor_version_compatibility() -> None:
    decision = decide((12, 9), Driver(cuda=(12, 2)), compat_present=False)

    assert decision.outcome is Outcome.START
    assert "minor-version compatibility" in decision.message


def test_nothing_to_check_without_a_gpu_or_without_the_images_cuda_version() -> None:
    assert decide((12, 4), Driver(cuda=None), compat_present=False).outcome is Outcome.START
    assert decide(None, SAGEMAKER_DEFAULT, compat_present=False).outcome is Outcome.START


def test_a_cuda_newer_than_every_documented_ami_says_so() -> None:
    newest = max(ami.cuda for ami in INFERENCE_AMIS)
    decision = decide((newest[0] + 2, 0), SAGEMAKER_DEFAULT, compat_present=False)

    assert decision.outcome is Outcome.REFUSE
    assert "no InferenceAmiVersion SageMaker documents runs it" in decision.message


def test_the_reader_takes_the_drivers_cuda_and_the_gpu_brands_from_nvml() -> None:
    nvml = FakeNvml(12020, brands=(pynvml.NVML_BRAND_NVIDIA, pynvml.NVML_BRAND_TESLA))
    assert read_driver(nvml) == Driver(cuda=(12, 2), datacenter=True) and nvml.shut_down
    assert read_driver(FakeNvml(12020, brands=(pynvml.NVML_BRAND_GEFORCE_RTX,))).datacenter is False
    assert read_driver(FakeNvml(None)) == Driver(cuda=None)


def test_at_start_puts_the_compat_folder_first_on_the_engines_library_path(tmp_path: Path) -> None:
    (tmp_path / "libcuda.so.1").write_bytes(b"")
    environ = {"CUDA_VERSION": "12.9.1", "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}

    decision = at_start(environ, FakeNvml(11040), compat_dir=tmp_path)

    assert decision.outcome is Outcome.COMPAT
    assert environ["LD_LIBRARY_PATH"] == f"{tmp_path}:/usr/local/nvidia/lib64"
    untouched = {"CUDA_VERSION": "12.9.1"}
    assert at_start(untouched, FakeNvml(12090), compat_dir=tmp_path).outcome is Outcome.START
    assert "LD_LIBRARY_PATH" not in untouched
    # No libcuda.so.1 in the folder: no compat libraries, whatever the folder's name.
    assert at_start({"CUDA_VERSION": "12.9.1"}, FakeNvml(11040), compat_dir=tmp_path / "none").outcome is Outcome.REFUSE


def test_the_entrypoint_exits_1_naming_the_ami_before_anything_listens(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    for name, value in {"ENDPOINT_NAME": "e", "VARIANT_NAME": "primary", "MODEL_VERSION": "v1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CUDA_VERSION", "12.9.1")
    monkeypatch.setattr("gateway.cuda_check.COMPAT_DIR", tmp_path)  # an image without compat libraries
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(11040))
    served: list[Any] = []
    monkeypatch.setattr(entrypoint, "serve", served.append)

    with caplog.at_level(logging.ERROR, logger="gateway.__main__"):
        code = entrypoint.main(["serve"])

    assert code == 1 and served == []
    assert "cannot start:" in caplog.text
    assert "choose InferenceAmiVersion al2023-ami-sagemaker-inference-gpu-4-1" in caplog.text
