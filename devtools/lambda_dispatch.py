"""Make moto's Docker-free Lambda backend run this project's real handlers.

moto's ``LambdaSimpleBackend.invoke`` only echoes the payload. Replacing it in the test process
(where the threaded moto server runs) with a dispatcher that imports a function's ``app.py`` and
calls ``lambda_handler`` makes ``lambda:invoke`` tasks in executed state machines run project code.
This is the project's own emulation of Lambda's runtime, not moto's: say so in tests that rely on it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from moto.awslambda_simple.models import LambdaSimpleBackend

FUNCTIONS_DIR = Path(__file__).resolve().parents[1] / "functions"

_routes: dict[str, str] = {}  # Lambda function name -> folder under functions/
_modules: dict[str, ModuleType] = {}


@dataclass
class FakeLambdaContext:
    """The attributes of Lambda's context object that Powertools reads."""

    function_name: str
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:emulated"
    aws_request_id: str = "emulated-request"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def load_handler_module(folder: str) -> ModuleType:
    """Import ``functions/<folder>/app.py`` under a unique module name (every function has an app.py)."""
    if folder not in _modules:
        path = FUNCTIONS_DIR / folder / "app.py"
        spec = importlib.util.spec_from_file_location(f"functions_{folder}_app", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"no handler at {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        _modules[folder] = module
    return _modules[folder]


def _invoke(
    self: LambdaSimpleBackend, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
) -> bytes:
    name = function_name.rsplit(":", maxsplit=1)[-1] if function_name.startswith("arn:") else function_name
    folder = _routes.get(name)
    if folder is None:
        raise KeyError(
            f"lambda_dispatch: no project handler registered for function {name!r}; known: {sorted(_routes)}"
        )
    module = load_handler_module(folder)
    event = json.loads(body) if body else {}
    try:
        result = module.lambda_handler(event, FakeLambdaContext(function_name=name))
    except Exception as exc:  # Lambda reports a handler error as a function error payload
        response_headers["x-amz-function-error"] = "Unhandled"
        return json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)}).encode()
    return json.dumps(result).encode()


@contextmanager
def cold_start_environment(variables: Mapping[str, str], folders: Iterable[str]) -> Iterator[None]:
    """Give the functions in ``folders`` this environment, as their deployed configuration would.

    Handlers read their settings at import (as in Lambda), so their cached modules are dropped on entry and
    exit: the next invocation is a cold start with this environment. The environment is restored on exit.
    """
    saved = {key: os.environ.get(key) for key in variables}
    os.environ.update(variables)
    folders = list(folders)
    for folder in folders:
        _modules.pop(folder, None)
    try:
        yield
    finally:
        for folder in folders:
            _modules.pop(folder, None)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def dispatch_lambdas(routes: dict[str, str]) -> Iterator[None]:
    """Route invocations of the named Lambda functions to ``functions/<folder>/app.py``."""
    original = LambdaSimpleBackend.invoke
    _routes.update(routes)
    LambdaSimpleBackend.invoke = _invoke  # type: ignore[method-assign]
    try:
        yield
    finally:
        LambdaSimpleBackend.invoke = original  # type: ignore[method-assign]
        for name in routes:
            _routes.pop(name, None)
