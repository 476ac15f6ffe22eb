"""Emulated AWS: a moto server on a free loopback port, reached over HTTP through ``AWS_ENDPOINT_URL``.

The code under test builds ordinary boto3 clients; boto3 reads ``AWS_ENDPOINT_URL`` and talks to
this server exactly as it would talk to AWS. Step Functions really executes ASL here.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import boto3
import requests
from moto.server import ThreadedMotoServer

from devtools.emulated_account import REGION
from devtools.emulator_extensions import events_lambda

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class MotoServer:
    endpoint_url: str
    port: int

    def reset(self) -> None:
        """Forget every emulated resource (between tests), once nothing started before can act on what comes next."""
        self.settle()
        requests.post(f"{self.endpoint_url}/moto-api/reset", timeout=10).raise_for_status()
        self.configure()

    def settle(self) -> None:
        """Stop the state machine executions still running and drop the Lambda deliveries still queued.

        moto's reset clears the resources but not the threads that act on them: an execution waiting out a poll
        loop, or a responder invocation queued behind a slow one, would otherwise carry on against the next
        test's (or demo part's) endpoint, alarms and lease, which have the same names.
        """
        sfn = boto3.client("stepfunctions", endpoint_url=self.endpoint_url)
        for page in sfn.get_paginator("list_state_machines").paginate():
            for machine in page["stateMachines"]:
                runs = sfn.get_paginator("list_executions")
                for listed in runs.paginate(stateMachineArn=machine["stateMachineArn"], statusFilter="RUNNING"):
                    for execution in listed["executions"]:
                        sfn.stop_execution(executionArn=execution["executionArn"], cause="the emulator was reset")
        events_lambda.drop_pending()

    def configure(self) -> None:
        # Execute state machines for real; Lambda tasks run without Docker (see devtools.lambda_dispatch).
        requests.post(
            f"{self.endpoint_url}/moto-api/config",
            json={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}},
            timeout=10,
        ).raise_for_status()


@contextmanager
def moto_server() -> Iterator[MotoServer]:
    """Start a moto server and point this process's AWS SDK at it for the duration.

    ``MOTO_PORT`` is set because moto's ASL interpreter calls the other emulated services there.
    """
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per emulated call drowns the output
    port = free_port()
    saved = {k: os.environ.get(k) for k in [*FAKE_CREDENTIALS, "AWS_ENDPOINT_URL", "MOTO_PORT"]}
    os.environ.update(FAKE_CREDENTIALS)
    os.environ["MOTO_PORT"] = str(port)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    emulator = MotoServer(endpoint_url=f"http://127.0.0.1:{port}", port=port)
    os.environ["AWS_ENDPOINT_URL"] = emulator.endpoint_url
    try:
        # moto keeps its emulated resources in this process, not in the server: a second server would see the
        # first one's tables. Start each one empty, as a fresh process would.
        emulator.reset()
        yield emulator
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
