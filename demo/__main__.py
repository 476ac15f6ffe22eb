"""Run the demo's parts in order on one emulated AWS account.

Each part is a module ``demo/<part>.py`` with ``run(emulator: MotoServer) -> None``.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time

from demo.expect import missed
from devtools.emulator import moto_server

PARTS = ["release_week", "one_system", "promotion", "prescale", "bedrock_import", "container"]

# The story is printed by the parts; the functions' own JSON logs and EMF lines would drown it.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "manga-llm-fleet-demo")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "MangaAssistant/LLMServing")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
# moto's state machine interpreter logs every failure event (an expected rollback, an aborted rollout) as ERROR.
logging.getLogger("moto").setLevel(logging.CRITICAL)


def main(only: list[str]) -> int:
    with moto_server() as emulator:
        for part in only or PARTS:
            try:
                module = importlib.import_module(f"demo.{part}")
            except ModuleNotFoundError as exc:
                if exc.name != f"demo.{part}":
                    raise
                continue
            print(f"\n{'=' * 100}\n  {part}\n{'=' * 100}", flush=True)
            started = time.monotonic()
            emulator.reset()
            module.run(emulator)
            print(f"({part}: {time.monotonic() - started:.0f} s)", flush=True)
    if missed:
        print(f"\nThe demo did not go as its story says ({len(missed)}):", *missed, sep="\n  ", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
