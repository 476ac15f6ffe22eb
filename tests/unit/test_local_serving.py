"""The local-serving helpers the container tests, benchmarks and demo share."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from devtools.local_serving import _spawn, sse_data


def test_sse_data_keeps_an_event_whole_across_unicode_line_separators() -> None:
    # vLLM writes non-ASCII raw; U+2028 and U+0085 are legal inside JSON strings but str.splitlines splits there.
    body = 'data: {"delta":"a\u2028b\x85c"}\r\n\r\ndata: [DONE]\n\n'
    assert sse_data(body) == ['{"delta":"a\u2028b\x85c"}', "[DONE]"]


def test_sse_data_ignores_comments_and_other_fields() -> None:
    assert sse_data(": keep-alive\n\nevent: ping\ndata: 1\n\n") == ["1"]


def test_spawn_pins_the_process_to_the_given_cpus(tmp_path: Path) -> None:
    cpu = min(os.sched_getaffinity(0))
    code = "import os; print(sorted(os.sched_getaffinity(0)))"
    process = _spawn([sys.executable, "-c", code], dict(os.environ), tmp_path, "pinned", {cpu})
    assert process.popen.wait(timeout=30) == 0
    assert process.stdout().strip() == f"[{cpu}]"
