"""The layer's YAML files compiled to JSON at build time, so that a cold start neither imports nor runs PyYAML.

Importing PyYAML and parsing the files cost the config-reading handlers about a tenth of their cold import
(``make bench BENCH=handler_import``). ``make build`` writes ``<file>.yaml.json`` beside each YAML file of the
built layer's ``fleet_config/``: the parsed document with the sha256 of the YAML text it came from.
:func:`fleetops.validation.read_yaml_mapping` takes the compiled document only while that hash matches the YAML
beside it, so an edited file is parsed again and never shadowed by its old copy.

A document is compiled only when JSON holds it exactly and when it has no key given twice; otherwise (a date, an
integer key, a duplicate) it stays YAML-only and is parsed at each cold start as before.

    python -m fleetops.compiled_yaml .aws-sam/build/CoreLayer/python/fleet_config
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any


def compiled_path(source: Path) -> Path:
    """Where the compiled copy of ``source`` lies: ``fleet.yaml`` -> ``fleet.yaml.json``."""
    return source.with_name(source.name + ".json")


def _digest(text: bytes) -> str:
    return hashlib.sha256(text).hexdigest()


def read_compiled(source: Path, text: bytes) -> Any | None:
    """The compiled document of ``source`` when its hash is that of ``text`` (the YAML as read now), else None."""
    try:
        compiled = json.loads(compiled_path(source).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(compiled, dict) or compiled.get("sha256") != _digest(text):
        return None
    return compiled.get("document")


def _compiled_text(source: Path) -> str | None:
    """The compiled copy of ``source`` as text; None when JSON cannot hold the document exactly."""
    import yaml

    from fleetops.safe_yaml import UniqueKeySafeLoader

    text = source.read_bytes()
    try:
        document = yaml.load(text, Loader=UniqueKeySafeLoader)
        encoded = json.dumps({"sha256": _digest(text), "document": document}, ensure_ascii=False, allow_nan=False)
    except (yaml.YAMLError, TypeError, ValueError):
        return None
    if json.loads(encoded)["document"] != document:  # e.g. an integer key, which JSON makes a string
        return None
    return encoded


def compile_yaml(source: Path) -> Path | None:
    """Write ``source``'s compiled copy and return its path; None when the document cannot be compiled exactly."""
    encoded = _compiled_text(source)
    if encoded is None:
        return None
    target = compiled_path(source)
    target.write_text(encoded, encoding="utf-8")
    return target


def compile_folder(folder: Path) -> tuple[list[Path], list[Path]]:
    """Compile every ``*.yaml`` of ``folder``; returns the files compiled and those left YAML-only."""
    compiled: list[Path] = []
    kept: list[Path] = []
    for source in sorted(folder.glob("*.yaml")):
        (compiled if compile_yaml(source) else kept).append(source)
    return compiled, kept


def not_compiled(folder: Path) -> list[Path]:
    """The ``*.yaml`` of ``folder`` that could be compiled but have no fresh compiled copy."""
    return [
        source
        for source in sorted(folder.glob("*.yaml"))
        if read_compiled(source, source.read_bytes()) is None and _compiled_text(source) is not None
    ]


def main(argv: list[str]) -> int:
    compiled, kept = compile_folder(Path(argv[0]))
    print(f"compiled {len(compiled)} YAML files to JSON" + (f"; parsed at each cold start: {kept}" if kept else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
