"""The layer's YAML compiled to JSON at build time (``fleetops.compiled_yaml``), read through ``read_yaml_mapping``.

What a deployed handler sees: the same mapping as from the YAML, without importing PyYAML; an edited file read
afresh; a document JSON cannot hold left YAML-only and read as before.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fleetops.compiled_yaml import compile_folder, compile_yaml, compiled_path, not_compiled
from fleetops.config import load_fleet_config
from fleetops.validation import read_yaml_mapping
from tests.conftest import REPO

SHIPPED = REPO / "layers" / "core" / "fleet_config"


def _shipped_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "fleet_config"
    folder.mkdir()
    for source in SHIPPED.glob("*.yaml"):
        (folder / source.name).write_bytes(source.read_bytes())
    return folder


def test_every_shipped_file_compiles_to_the_mapping_its_yaml_gives(tmp_path: Path) -> None:
    folder = _shipped_copy(tmp_path)
    parsed = {source.name: read_yaml_mapping(source, "file", ValueError) for source in folder.glob("*.yaml")}

    compiled, kept = compile_folder(folder)

    assert kept == [] and len(compiled) == len(parsed) >= 4
    assert not_compiled(folder) == []
    assert {source.name: read_yaml_mapping(source, "file", ValueError) for source in compiled} == parsed


def test_a_cold_start_reading_compiled_files_never_imports_pyyaml(tmp_path: Path) -> None:
    folder = _shipped_copy(tmp_path)
    probe = (
        "import sys; from fleetops.config import load_fleet_config; "
        "from fleetops.promotion.eval_suite import load_eval_suite; "
        f"load_fleet_config({str(folder / 'fleet.yaml')!r}); load_eval_suite({str(folder / 'eval_suite.yaml')!r}); "
        "print('yaml' in sys.modules)"
    )

    def imports_yaml() -> str:
        env = {"PYTHONPATH": str(REPO / "layers" / "core")}
        return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout

    assert imports_yaml().strip() == "True"
    compile_folder(folder)
    assert imports_yaml().strip() == "False"


def test_an_edited_file_is_read_afresh_not_from_its_old_compiled_copy(tmp_path: Path) -> None:
    folder = _shipped_copy(tmp_path)
    compile_folder(folder)
    fleet = folder / "fleet.yaml"
    fleet.write_text(fleet.read_text().replace("manga-chat-prod", "manga-chat-edited", 1))

    assert "manga-chat-edited" in [e.name for e in load_fleet_config(fleet).endpoints]
    assert not_compiled(folder) == [fleet]


@pytest.mark.parametrize(
    "text",
    [
        "released: 2026-12-04\n",  # YAML gives a date: JSON would give it back as a string
        "ranks:\n  1: frieren\n",  # an integer key: JSON would give it back as "1"
        "title: a\ntitle: b\n",  # a key given twice: left to the reader's loader to accept or refuse
    ],
)
def test_a_document_json_cannot_hold_exactly_stays_yaml_only(tmp_path: Path, text: str) -> None:
    source = tmp_path / "entries.yaml"
    source.write_text(text)

    assert compile_yaml(source) is None
    assert not compiled_path(source).exists()
    assert not_compiled(tmp_path) == []  # nothing the build should have compiled
    assert read_yaml_mapping(source, "entries", ValueError) != {}
    if "title: a" in text:
        with pytest.raises(ValueError, match=r"keys given twice: \['title'\]"):
            read_yaml_mapping(source, "entries", ValueError, unique_keys=True)
