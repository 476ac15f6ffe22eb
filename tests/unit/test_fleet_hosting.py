"""fleet.yaml's per-endpoint ``hosting``: the AMIs SageMaker documents, the timeouts' bounds, the shipped files."""

from __future__ import annotations

from pathlib import Path

import botocore.session
import pytest

from fleetops.config import FleetConfigError, InitialModel, VariantHosting, load_fleet_config
from fleetops.inference_ami import INFERENCE_AMIS, NEWEST_INFERENCE_AMI
from fleetops.rollout.versions import VERSION_PATTERN

REPO = Path(__file__).resolve().parents[2]
FLEET_FILES = [REPO / "layers" / "core" / "fleet_config" / "fleet.yaml", REPO / "devtools" / "workflow_fleet.yaml"]


def _botocore_amis() -> list[str]:
    model = botocore.session.get_session().get_service_model("sagemaker")
    return list(model.shape_for("ProductionVariantInferenceAmiVersion").enum)  # type: ignore[attr-defined]


def test_the_ami_table_is_the_gpu_amis_of_sagemakers_api_model() -> None:
    gpu = [name for name in _botocore_amis() if "-gpu-" in name]
    # A new GPU AMI in the API: add it to INFERENCE_AMIS with its driver and CUDA (the API's documentation says).
    assert sorted(ami.name for ami in INFERENCE_AMIS) == sorted(gpu)
    assert [ami.cuda for ami in INFERENCE_AMIS] == sorted(ami.cuda for ami in INFERENCE_AMIS)  # oldest first
    assert VariantHosting().inference_ami_version == NEWEST_INFERENCE_AMI == "al2023-ami-sagemaker-inference-gpu-4-1"


@pytest.mark.parametrize("path", FLEET_FILES, ids=lambda p: p.name)
def test_every_shipped_endpoint_names_a_documented_ami_and_timeouts(path: Path) -> None:
    for endpoint in load_fleet_config(path).endpoints:
        assert endpoint.hosting.inference_ami_version in {ami.name for ami in INFERENCE_AMIS}
        assert 60 <= endpoint.hosting.container_startup_health_check_timeout_s <= 3600
        assert "hosting:" in path.read_text()  # written out, not left to the schema's defaults


def test_an_unknown_ami_or_a_timeout_sagemaker_refuses_fails_the_fleet_file(tmp_path: Path) -> None:
    text = FLEET_FILES[0].read_text()
    bad = text.replace("al2023-ami-sagemaker-inference-gpu-4-1  #", "al2-ami-sagemaker-inference-gpu-9  #", 1)
    bad = bad.replace("model_data_download_timeout_s: 1200  ", "model_data_download_timeout_s: 30  ", 1)
    path = tmp_path / "fleet.yaml"
    path.write_text(bad)

    with pytest.raises(FleetConfigError) as raised:
        load_fleet_config(path)

    message = str(raised.value)
    assert "inference_ami_version 'al2-ami-sagemaker-inference-gpu-9' is not a GPU AMI SageMaker documents" in message
    assert "model_data_download_timeout_s" in message and "greater than or equal to 60" in message


def test_the_first_models_version_follows_the_rollouts_rule() -> None:
    assert InitialModel.model_fields["version"].metadata[-1].pattern == VERSION_PATTERN
