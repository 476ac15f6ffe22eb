"""The gateway stays a small process: it must not pull torch, transformers or vLLM into memory."""

from __future__ import annotations

import json
import subprocess
import sys

from devtools.local_serving import PYTHONPATH


def test_gateway_imports_no_torch_transformers_or_vllm() -> None:
    code = (
        "import json, sys, gateway.__main__, gateway.app, gateway.serving, gateway.prompt, gateway.supervisor;"
        "print(json.dumps(sorted(m for m in ('torch', 'transformers', 'vllm') if m in sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": PYTHONPATH},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(result.stdout) == []
