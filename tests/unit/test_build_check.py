"""The check of what ``sam build`` built (``devtools.check_build``), on small build folders made here.

``make build`` runs it on the real ``sam build`` output; these tests show that each of its findings can fail,
and what a person deploying sees then.
"""

from __future__ import annotations

import py_compile
from pathlib import Path

import pytest

from devtools.check_build import UNZIPPED_LIMIT_BYTES, check, locked_versions
from fleetops.compiled_yaml import compile_yaml, compiled_path

LOCK = """\
pydantic==2.14.4 \\
    --hash=sha256:aaaa
    # via -r layers/core/requirements.in
pydantic-core==2.50.5 \\
    --hash=sha256:bbbb
"""
TEMPLATE = """\
Globals:
  Function:
    Runtime: python3.13
    Architectures: [arm64]
    Layers: [!Ref CoreLayer]
Resources:
  CoreLayer:
    Type: AWS::Serverless::LayerVersion
    Properties:
      ContentUri: CoreLayer
      CompatibleRuntimes: [python3.13]
      CompatibleArchitectures: [arm64]
  PrescaleFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: PrescaleFunction
      Handler: app.lambda_handler
"""


def _dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


HANDLER = "def lambda_handler(event, context): ...\n"


def build(tmp_path: Path, *, pydantic: str = "2.14.4", handler: str = HANDLER) -> Path:
    (tmp_path / "template.yaml").write_text(TEMPLATE)
    site = tmp_path / "CoreLayer" / "python"
    for part in ("fleetops", "fleet_config"):
        (site / part).mkdir(parents=True)
    (site / "fleet_config" / "playbook.yaml").write_text("actions: []\n")
    compile_yaml(site / "fleet_config" / "playbook.yaml")
    _dist(site, "pydantic", pydantic)
    _dist(site, "pydantic-core", "2.50.5")
    (site / "pydantic_core").mkdir()
    (site / "pydantic_core" / "_pydantic_core.cpython-313-aarch64-linux-gnu.so").write_bytes(b"\0")
    (tmp_path / "PrescaleFunction").mkdir()
    (tmp_path / "PrescaleFunction" / "app.py").write_text(handler)
    compile_as_lambda(tmp_path / "PrescaleFunction" / "app.py")
    return tmp_path


def compile_as_lambda(
    source: Path, mode: py_compile.PycInvalidationMode = py_compile.PycInvalidationMode.UNCHECKED_HASH
) -> None:
    """What ``make build`` leaves beside a module (the name python3.13 gives it; this Python's bytecode)."""
    py_compile.compile(
        str(source), cfile=str(source.parent / "__pycache__" / f"{source.stem}.cpython-313.pyc"), invalidation_mode=mode
    )


TESTED = {"pydantic": "2.14.4", "pydantic-core": "2.50.5"}


def test_the_lock_is_read_as_name_and_version_whatever_the_spelling() -> None:
    assert locked_versions(LOCK + "PyYAML==6.0.4 \\\n") == {
        "pydantic": "2.14.4",
        "pydantic-core": "2.50.5",
        "pyyaml": "6.0.4",
    }


def test_a_build_as_locked_and_tested_passes(tmp_path: Path) -> None:
    problems, built = check(build(tmp_path), LOCK, TESTED)

    assert problems == []
    assert (built.functions, built.packages) == (1, 2)
    assert 0 < built.largest_unzipped_bytes < UNZIPPED_LIMIT_BYTES


def test_a_layer_package_at_another_version_than_the_lock_is_named(tmp_path: Path) -> None:
    problems, _ = check(build(tmp_path, pydantic="2.15.0"), LOCK, TESTED)

    assert problems == ["layer: pydantic 2.15.0 bundled, the lock says 2.14.4"]


def test_a_lock_the_tests_did_not_run_with_is_named(tmp_path: Path) -> None:
    problems, _ = check(build(tmp_path), LOCK, {**TESTED, "pydantic": "2.13.0"})

    assert problems == ["layer: pydantic 2.14.4 locked, but the tests ran with 2.13.0"]


def test_a_package_missing_from_the_layer_or_not_in_the_lock_is_named(tmp_path: Path) -> None:
    built = build(tmp_path)
    _dist(built / "CoreLayer" / "python", "requests", "2.32.0")

    problems, _ = check(built, LOCK + "tenacity==9.2.1 \\\n", TESTED)

    assert problems == [
        "layer: tenacity==9.2.1 is locked but not bundled",
        "layer: requests 2.32.0 bundled but not in the lock",
    ]


def test_an_extension_built_for_another_machine_is_named(tmp_path: Path) -> None:
    built = build(tmp_path)
    extension = built / "CoreLayer" / "python" / "pydantic_core" / "_pydantic_core.cpython-313-aarch64-linux-gnu.so"
    extension.rename(extension.with_name("_pydantic_core.cpython-311-x86_64-linux-gnu.so"))

    problems, _ = check(built, LOCK, TESTED)

    assert problems == [
        "layer: pydantic_core/_pydantic_core.cpython-311-x86_64-linux-gnu.so is not built for cpython-313-aarch64"
    ]


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        (None, "PrescaleFunction: handler module app.py is not in the built code"),
        ("def handler(event, context): ...\n", "PrescaleFunction: app.py defines no 'lambda_handler'"),
    ],
)
def test_a_function_without_its_handler_is_named(tmp_path: Path, source: str | None, problem: str) -> None:
    built = build(tmp_path, handler=source or "")
    if source is None:
        (built / "PrescaleFunction" / "app.py").unlink()

    problems, _ = check(built, LOCK, TESTED)

    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_a_function_over_lambdas_unzipped_limit_with_its_layer_is_named(tmp_path: Path) -> None:
    built = build(tmp_path)
    with (built / "CoreLayer" / "python" / "fleetops" / "blob.bin").open("wb") as blob:
        blob.truncate(UNZIPPED_LIMIT_BYTES)  # sparse: counts its size without writing it

    problems, _ = check(built, LOCK, TESTED)

    assert len(problems) == 1 and "over Lambda's 250 MB" in problems[0], problems


def test_modules_without_bytecode_for_the_runtime_are_named(tmp_path: Path) -> None:
    built = build(tmp_path)
    (built / "CoreLayer" / "python" / "fleetops" / "config.py").write_text("LIMIT = 1\n")
    timestamped = built / "CoreLayer" / "python" / "fleetops" / "calendar.py"
    timestamped.write_text("LIMIT = 2\n")
    compile_as_lambda(timestamped, py_compile.PycInvalidationMode.TIMESTAMP)  # stale once the zip moves its mtime
    (built / "PrescaleFunction" / "__pycache__" / "app.cpython-313.pyc").rename(
        built / "PrescaleFunction" / "__pycache__" / "app.cpython-311.pyc"
    )

    problems, _ = check(built, LOCK, TESTED)

    assert problems == [
        "layer CoreLayer: 2 modules without python3.13 bytecode (first: python/fleetops/calendar.py); Lambda would "
        "compile them at every cold start: `make build` compiles them",
        "PrescaleFunction: 1 modules without python3.13 bytecode (first: app.py); Lambda would compile them at "
        "every cold start: `make build` compiles them",
    ]


def test_a_config_file_without_its_fresh_compiled_copy_is_named(tmp_path: Path) -> None:
    built = build(tmp_path)
    playbook = built / "CoreLayer" / "python" / "fleet_config" / "playbook.yaml"
    playbook.write_text("actions: [scale_out]\n")  # edited after the build compiled it
    (playbook.parent / "fleet.yaml").write_text("endpoints: []\n")  # never compiled
    (playbook.parent / "calendar.yaml").write_text("on: 2026-12-04\n")  # a date: stays YAML-only, rightly

    problems, _ = check(built, LOCK, TESTED)

    assert problems == [
        "layer: fleet_config/fleet.yaml has no fresh compiled copy (a cold start would parse it): `make build`",
        "layer: fleet_config/playbook.yaml has no fresh compiled copy (a cold start would parse it): `make build`",
    ]
    assert compiled_path(playbook).exists()
