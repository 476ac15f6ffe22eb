"""Bytecode shipped with the Lambda code: without it, every cold start compiles every module it imports.

Lambda's ``/var/task`` and ``/opt`` are read-only, so Python cannot keep what it compiles, and ``sam build``
bundles sources only (the layer's packages included). Measured on the alarm responder with the layer's packages
(``make bench BENCH=handler_import``): its cold import takes about twice as long from sources alone.
``make build`` compiles the build with Lambda's Python; ``unchecked-hash`` pyc files are used whatever the
sources' timestamps become in the zip, which is safe for a build that nobody edits after it is made.

    python -m devtools.bytecode PYTHON313 .aws-sam/build
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: Flags of a pyc header (PEP 552): bit 0 hash-based, bit 1 check the source.
UNCHECKED_HASH_FLAGS = 0b01


def precompile(python: str, tree: Path) -> None:
    """Compile every module under ``tree`` with ``python`` (Lambda's version), next to its source."""
    command = [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", str(tree)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def without_bytecode(tree: Path, tag: str) -> list[Path]:
    """The modules under ``tree`` that have no unchecked-hash pyc for interpreter ``tag`` (``cpython-313``)."""
    missing = []
    for source in sorted(tree.rglob("*.py")):
        compiled = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        try:
            with compiled.open("rb") as header:
                flags: int | None = int.from_bytes(header.read(8)[4:], "little")
        except OSError:
            flags = None
        if flags != UNCHECKED_HASH_FLAGS:
            missing.append(source)
    return missing


if __name__ == "__main__":
    precompile(sys.argv[1], Path(sys.argv[2]))
