"""``make image`` / ``make push`` / ``make pin-base-image`` (devtools/image.py).

ECR is the emulator's, over HTTP. This machine has no Docker daemon: the build and push steps run against a
stand-in ``docker`` on PATH (a test double, named as such) that records each call, so the tests check what the
tool asks Docker to do; the real ``docker`` is used to show what a user without a daemon sees.
"""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import boto3
import pytest

from devtools import image

DIGEST = "sha256:" + "ab" * 32
FAKE_DOCKER = """#!/bin/sh
# Test double for docker: records argv and stdin, answers `inspect` with the pushed image's repo digest.
echo "$*" >> "{log}"
if [ "$1" = "login" ]; then cat >> "{log}"; echo >> "{log}"; fi
if [ "$1" = "inspect" ]; then echo "[\\"${{4%:*}}@{digest}\\"]"; fi
exit 0
"""


@pytest.fixture
def docker_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "docker.log"
    fake = tmp_path / "bin" / "docker"
    fake.parent.mkdir()
    fake.write_text(FAKE_DOCKER.format(log=log, digest=DIGEST))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    return log


def test_the_repository_is_created_once_with_immutable_tags_and_scanning() -> None:
    ecr = boto3.client("ecr")

    first = image.ensure_repository(ecr, "manga-llm")
    again = image.ensure_repository(ecr, "manga-llm")

    [repo] = ecr.describe_repositories(repositoryNames=["manga-llm"])["repositories"]
    assert first == again == repo["repositoryUri"]
    assert repo["imageTagMutability"] == "IMMUTABLE" and repo["imageScanningConfiguration"]["scanOnPush"] is True


def test_push_logs_in_with_an_ecr_token_on_stdin_tags_pushes_and_answers_by_digest(docker_log: Path) -> None:
    ecr = boto3.client("ecr")
    token = ecr.get_authorization_token()["authorizationData"][0]["authorizationToken"]
    password = base64.b64decode(token).decode().split(":", 1)[1]

    pushed = image.push(ecr, "manga-llm:v7-0123456789ab", "manga-llm")

    uri = ecr.describe_repositories(repositoryNames=["manga-llm"])["repositories"][0]["repositoryUri"]
    assert pushed == f"{uri}@{DIGEST}"
    calls = docker_log.read_text().splitlines()
    assert calls[0].startswith("login --username AWS --password-stdin ") and calls[1] == password
    assert password not in calls[0]  # never on the command line
    assert calls[2:5] == [
        f"tag manga-llm:v7-0123456789ab {uri}:v7-0123456789ab",
        f"push {uri}:v7-0123456789ab",
        f"inspect --format {{{{json .RepoDigests}}}} {uri}:v7-0123456789ab",
    ]


def test_build_targets_sagemakers_platform_from_the_repository_root(
    docker_log: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(image.pinned(image.DOCKERFILE.read_text(), DIGEST))
    monkeypatch.setattr(image, "DOCKERFILE", dockerfile)
    monkeypatch.setattr(image, "REPO", tmp_path)

    tag = image.build("v7", "0123456789abcdef", "gpu_container/model")

    assert tag == "manga-llm:v7-0123456789ab"
    [call] = docker_log.read_text().splitlines()
    assert call.startswith("build --platform linux/amd64 -f Dockerfile --build-arg MODEL_SOURCE=gpu_container/model")
    assert call.endswith(f"-t {tag} {tmp_path}")


def test_build_refuses_a_base_image_named_by_tag_only(
    docker_log: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM vllm/vllm-openai:v0.32.0\n")
    monkeypatch.setattr(image, "DOCKERFILE", dockerfile)

    with pytest.raises(image.ImageError, match="not pinned by digest: run `make pin-base-image`"):
        image.build("v7", "0123456789abcdef", "gpu_container/model")
    assert not docker_log.exists()  # nothing was built


def test_pinning_keeps_the_tag_and_refuses_what_is_not_a_digest() -> None:
    text = "# comment\nFROM vllm/vllm-openai:v0.32.0\nRUN true\n"

    assert image.pinned(text, DIGEST) == f"# comment\nFROM vllm/vllm-openai:v0.32.0@{DIGEST}\nRUN true\n"
    assert image.pinned(image.pinned(text, DIGEST), "sha256:" + "cd" * 32).count("sha256:") == 1
    with pytest.raises(image.ImageError, match="not an image digest"):
        image.pinned(text, "latest")


def test_without_a_docker_daemon_each_target_says_so_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")

    code = image.main(["build"])

    err = capsys.readouterr().err
    assert code == 2 and "needs a running Docker daemon" in err, err
    assert "Traceback" not in err
