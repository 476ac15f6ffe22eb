"""A test double for the emulator's SageMaker hosting (``devtools.emulator_extensions.sagemaker.Hosting``): one
endpoint whose every variant is served at one URL, with no container started, so that ``InvokeEndpoint`` reaches a
local HTTP server through the emulated runtime as it would reach a container."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class OneUrlHosting:
    """Every variant of endpoint ``endpoint`` is served at ``url``; updates settle on the emulator's clock."""

    endpoint: str
    url: str

    def launch(self, backend: Any, endpoint: Any, config: Any) -> None:
        return None

    def release(self, endpoint_arn: str) -> None:
        pass

    def hosts(self, endpoint_arn: str) -> bool:
        return endpoint_arn.endswith(f":endpoint/{self.endpoint}")

    def serving_url(self, endpoint_arn: str, variant_name: str) -> str | None:
        return self.url


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A threaded loopback HTTP server answering with ``handler`` while the block runs; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
