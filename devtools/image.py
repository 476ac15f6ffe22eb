"""Build and push the GPU image (``make image``, ``make push``), and pin its base image (``make pin-base-image``).

- ``build``: ``docker build --platform linux/amd64`` (SageMaker's GPU instances) from the repository root, tagged
  ``manga-llm:<version>-<git sha>``. Refused while the Dockerfile's ``FROM`` names its base by tag only.
- ``push``: creates the ECR repository when missing (immutable tags, scan on push), logs Docker in with an ECR
  token, tags and pushes, and prints the image URI by digest (``REPO@sha256:...``): what a rollout request
  takes (prod refuses tag-only references).
- ``pin-base``: resolves the base image's tag to its digest and writes ``FROM <tag>@<digest>`` with the tag kept in
  the line, the documented way to move the base image: edit the tag, run it again.

Docker is needed for all three; without a running daemon each says so and exits 2.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "gpu_container" / "Dockerfile"
IMAGE_NAME = "manga-llm"
PLATFORM = "linux/amd64"
_FROM = re.compile(r"^FROM (?P<image>[^\s@]+)(?:@(?P<digest>sha256:[0-9a-f]{64}))?\s*$", re.MULTILINE)


class ImageError(Exception):
    """A step that cannot go on; the message says what to do."""


@dataclass(frozen=True)
class BaseImage:
    image: str  # repository:tag
    digest: str | None


def base_image(dockerfile_text: str) -> BaseImage:
    """The Dockerfile's ``FROM`` image and its digest, if pinned.

    >>> base_image("FROM vllm/vllm-openai:v0.32.0\\n").digest is None
    True
    """
    found = _FROM.search(dockerfile_text)
    if found is None:
        raise ImageError("the Dockerfile has no FROM line this tool understands (FROM image:tag[@sha256:...])")
    return BaseImage(found["image"], found["digest"])


def pinned(dockerfile_text: str, digest: str) -> str:
    """The Dockerfile with its ``FROM`` pinned to ``digest``, the tag kept for people."""
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise ImageError(f"not an image digest: {digest!r}")
    base = base_image(dockerfile_text)
    return _FROM.sub(f"FROM {base.image}@{digest}", dockerfile_text, count=1)


def image_tag(version: str, git_sha: str) -> str:
    return f"{IMAGE_NAME}:{version}-{git_sha[:12]}"


def _docker(*args: str, stdin: str | None = None) -> str:
    try:
        done = subprocess.run(["docker", *args], input=stdin, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise ImageError("docker is not installed: install Docker (or Finch) to build the image") from None
    if done.returncode != 0:
        raise ImageError(f"docker {args[0]} failed: {done.stderr.strip()[-800:]}")
    return done.stdout


def require_docker() -> None:
    try:
        _docker("info", "--format", "{{.ServerVersion}}")
    except ImageError as error:
        raise ImageError(
            f"{error}\nthis needs a running Docker daemon (none answers here); on a machine without one, build "
            "with CI or a workstation that has Docker: make image && make push"
        ) from None


def build(version: str, git_sha: str, model_source: str) -> str:
    base = base_image(DOCKERFILE.read_text())
    if base.digest is None:
        raise ImageError(f"FROM {base.image} is not pinned by digest: run `make pin-base-image` first")
    tag = image_tag(version, git_sha)
    _docker(
        "build",
        "--platform",
        PLATFORM,
        "-f",
        str(DOCKERFILE.relative_to(REPO)),
        "--build-arg",
        f"MODEL_SOURCE={model_source}",
        "-t",
        tag,
        str(REPO),
    )
    return tag


def ensure_repository(ecr: Any, name: str) -> str:
    """The repository's URI, created (immutable tags, scan on push, KMS-encrypted) when missing."""
    try:
        found = ecr.describe_repositories(repositoryNames=[name])["repositories"][0]
    except ecr.exceptions.RepositoryNotFoundException:
        found = ecr.create_repository(
            repositoryName=name,
            imageTagMutability="IMMUTABLE",
            imageScanningConfiguration={"scanOnPush": True},
            encryptionConfiguration={"encryptionType": "KMS"},
        )["repository"]
    return str(found["repositoryUri"])


def docker_login(ecr: Any) -> str:
    """Logs Docker in to the account's registry with an ECR token (password on stdin); returns the registry."""
    data = ecr.get_authorization_token()["authorizationData"][0]
    user, password = base64.b64decode(data["authorizationToken"]).decode().split(":", 1)
    registry = str(data["proxyEndpoint"]).removeprefix("https://")
    _docker("login", "--username", user, "--password-stdin", registry, stdin=password)
    return registry


def push(ecr: Any, local_tag: str, repository: str) -> str:
    """Pushes ``local_tag`` to ``repository``; returns the pushed image by digest."""
    uri = ensure_repository(ecr, repository)
    docker_login(ecr)
    remote = f"{uri}:{local_tag.split(':', 1)[1]}"
    _docker("tag", local_tag, remote)
    _docker("push", remote)
    digests = json.loads(_docker("inspect", "--format", "{{json .RepoDigests}}", remote) or "[]")
    by_digest = next((d for d in digests if d.startswith(f"{uri}@")), None)
    if by_digest is None:
        raise ImageError(f"pushed {remote}, but Docker reports no digest for it in {uri}")
    return str(by_digest)


def resolve_base_digest(image: str) -> str:
    manifest = json.loads(_docker("buildx", "imagetools", "inspect", image, "--format", "{{json .Manifest}}"))
    return str(manifest["digest"])


def _git_sha() -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.image", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["build", "push", "pin-base"])
    parser.add_argument("--version", default="dev", help="the image's version, e.g. v7 (tag: VERSION-GITSHA)")
    parser.add_argument("--model-source", default="gpu_container/model", help="the model folder baked in")
    parser.add_argument("--repository", default=IMAGE_NAME, help="the ECR repository (created when missing)")
    args = parser.parse_args(argv)
    try:
        require_docker()
        if args.action == "pin-base":
            base = base_image(DOCKERFILE.read_text())
            digest = resolve_base_digest(base.image)
            DOCKERFILE.write_text(pinned(DOCKERFILE.read_text(), digest))
            print(f"FROM {base.image}@{digest}")
        elif args.action == "build":
            print(build(args.version, _git_sha().strip(), args.model_source))
        else:
            import boto3

            tag = image_tag(args.version, _git_sha().strip())
            print(push(boto3.client("ecr"), tag, args.repository))
    except ImageError as error:
        print(f"{parser.prog} {args.action}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
