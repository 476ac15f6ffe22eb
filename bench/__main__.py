"""Run benchmarks and write ``bench/results/<name>.json`` (flat numeric keys).

python -m bench                 # every benchmark
python -m bench handler_import  # one
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if not m.name.startswith("_"))


def run_one(name: str) -> dict[str, float]:
    module = importlib.import_module(f"bench.{name}")
    results: dict[str, float] = module.run()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"bench/results/{name}.json: {json.dumps(results, sort_keys=True)}", flush=True)
    return results


def main(argv: list[str]) -> int:
    names = argv or available()
    unknown = sorted(set(names) - set(available()))
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {available()}", file=sys.stderr)
        return 2
    for name in names:
        run_one(name)
    return 0


if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:] if a]))
