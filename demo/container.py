"""Demo part 4: the GPU data plane container on its own, run locally on the CPU.

Starts the container's entrypoint (``python -m gateway serve``) the way SageMaker does: it starts and
supervises a real vLLM engine (a tiny generated Llama with three LoRA adapters, on the CPU), warms
every adapter up, and only then answers ``/ping`` 200. Then a few chats: adapter routing by
locale/intent, a long session the context budget trims, a streamed answer, a bad request, and the
CloudWatch EMF lines the container prints for the alarms.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from devtools.emulator import MotoServer
from devtools.local_serving import default_max_model_len, sse_data, start_gateway
from devtools.tiny_model import ensure_tiny_model

REPO = Path(__file__).resolve().parents[1]
_WORDS = "which volume of the new shonen series ships next week and is the box set preorder open"


def _say(text: str) -> None:
    print(text, flush=True)


def _ask(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}/invocations", json={"max_tokens": 16, "temperature": 0, **body}, timeout=60)


def _long_session(turns: int) -> list[dict[str, str]]:
    rng = random.Random(4)
    words = _WORDS.split()
    history = []
    for i in range(turns):
        history.append({"role": "user", "content": f"({i}) " + " ".join(rng.choice(words) for _ in range(50))})
        history.append({"role": "assistant", "content": " ".join(rng.choice(words) for _ in range(60))})
    return history


def run(emulator: MotoServer) -> None:
    """Run the container locally and talk to it (the emulator is not needed: this part is the data plane)."""
    del emulator
    _say("Generating the tiny model, tokenizer and LoRA adapters (cached in .cache/tiny-model) ...")
    tiny = ensure_tiny_model(REPO / ".cache" / "tiny-model")
    with tempfile.TemporaryDirectory() as work:
        started = time.monotonic()
        _say("Starting the container entrypoint: python -m gateway serve (it starts vLLM on the CPU) ...")
        with start_gateway(tiny, Path(work), wait_ready_s=None, env={"METRICS_INTERVAL_S": "3"}) as gw:
            _say(f"  GET /ping right away -> {gw.ping()} (503 until the model is loaded and every adapter warmed)")
            while gw.ping() != 200:
                if not gw.process.alive():
                    raise RuntimeError(gw.process.stderr()[-3000:])
                time.sleep(1)
            _say(f"  GET /ping after {time.monotonic() - started:.0f} s -> 200: warm-up done for base + 3 adapters\n")

            _say("Adapter routing (gpu_container/config/gateway.yaml: locale/intent -> adapter):")
            for label, extra in (
                ("locale ja-JP", {"locale": "ja-JP"}),
                ("intent refund", {"intent": "refund"}),
                ("no hint (default)", {}),
                ("explicit base", {"adapter": "base"}),
            ):
                response = _ask(gw.url, {"messages": [{"role": "user", "content": "最新刊はいつ発売?"}], **extra})
                backend = response.json()["backend"]
                _say(f"  {label:<18} -> adapter {backend['adapter']:<16} backend {backend['version']}")

            _say("\nA 30-turn session, sent whole each turn; the budget keeps it inside max_model_len:")
            for turns in (4, 12, 13, 20, 30):
                question = [{"role": "user", "content": "and the next one?"}]
                session: dict[str, Any] = {"messages": question, "history": _long_session(turns)}
                response = _ask(gw.url, session)
                usage = response.json()["usage"]
                _say(
                    f"  turn {turns + 1:>2}: {turns:>2} prior turns -> dropped {response.headers['x-dropped-turns']:>2}"
                    f" (marker '[N earlier turns omitted]'), prompt {usage['prompt_tokens']} + max_tokens 16 tokens"
                    f" <= {default_max_model_len()}"
                )

            _say("\nA streamed answer (stream: true, as InvokeEndpointWithResponseStream uses it):")
            ask = [{"role": "user", "content": "recommend a manga"}]
            streamed = {"messages": ask, "stream": True, "max_tokens": 12}
            events = sse_data(httpx.post(f"{gw.url}/invocations", json=streamed, timeout=60).text)
            _say(f"  first event: {events[0][:140]}...")
            pieces = [json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[1:-1]]
            _say(f"  {len(pieces)} more events, text (random weights, so gibberish): {''.join(pieces)!r}")
            _say(f"  last event: {events[-1]}")

            _say("\nBad input is answered at once with a clear 4xx:")
            bad: tuple[dict[str, Any], ...] = (
                {"messages": [{"role": "user", "content": "hi"}], "adapter": "shonen_v9"},
                {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5000},
            )
            for body in bad:
                response = httpx.post(f"{gw.url}/invocations", json=body, timeout=10)
                _say(f"  {response.status_code} {response.json()['error']['message']}")

            time.sleep(3.5)  # one metrics interval
            _say("\nEMF lines on the container's stdout (CloudWatch Logs turns them into metrics for the alarms):")
            for line in gw.emf_lines()[-2:]:
                names = [m["Name"] for d in line["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]]
                values = {n: line[n] for n in names if n in line}
                summary = {n: (v if not isinstance(v, list) else f"[{len(v)} values]") for n, v in values.items()}
                _say(f"  {line['EndpointName']}/{line['VariantName']}: {json.dumps(summary)[:400]}")
            _say("\nSIGTERM (scale-in): the container drains in-flight work, stops the engine and exits 0.")
        _say(f"  exit code {gw.process.popen.returncode}")
