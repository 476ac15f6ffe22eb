"""Where results go: JSON for scripts, rich tables for people, progress and errors on stderr.

Colour only on a terminal and never with ``NO_COLOR`` (rich honours both); rich is imported only when
something is printed for a person, so ``--json`` and ``--help`` stay quick.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from fleetctl.errors import CliError

if TYPE_CHECKING:
    from pydantic import BaseModel
    from rich.console import Console, RenderableType

#: Width when stdout is not a terminal and ``COLUMNS`` is unset (a pipe, a file, a test).
PIPE_WIDTH = 120


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    is_terminal = stream.isatty()
    width = None if is_terminal or os.environ.get("COLUMNS") else PIPE_WIDTH
    return Console(file=stream, highlight=False, width=width, soft_wrap=False)


def as_json(data: BaseModel | dict[str, Any] | list[Any]) -> str:
    """The JSON text of a result: pydantic models as their JSON dump (times as ISO 8601)."""
    from pydantic import BaseModel

    payload = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
    return json.dumps(payload, indent=2, sort_keys=True, default=str)


class Output:
    """One per command run: ``--json`` or for people."""

    def __init__(self, json_mode: bool) -> None:
        self.json_mode = json_mode

    def result(self, data: BaseModel | dict[str, Any] | list[Any], render: Callable[[], RenderableType]) -> None:
        """Print the command's answer: ``data`` as JSON, or ``render()`` for a person."""
        if self.json_mode:
            sys.stdout.write(as_json(data) + "\n")
        else:
            _console().print(render())

    def info(self, text: str) -> None:
        """A line for the person (stderr, so that stdout stays the answer)."""
        if not self.json_mode:
            _console(stderr=True).print(text)

    def error(self, error: CliError) -> None:
        if self.json_mode:
            payload = {"error": error.message, "hint": error.hint, "exit_code": int(error.exit_code)}
            sys.stderr.write(json.dumps(payload, sort_keys=True) + "\n")
            return
        sys.stderr.write(f"fleetctl: error: {error.message}\n")
        if error.hint:
            sys.stderr.write(f"  next: {error.hint}\n")

    @contextmanager
    def progress(self, message: str) -> Iterator[Callable[[str], None]]:
        """Show that a long wait is alive: a spinner on a terminal, one line per change otherwise.

        Yields a function that updates the message (e.g. the workflow's current state).
        """
        console = _console(stderr=True)
        if self.json_mode or not console.is_terminal:
            last = [""]

            def line(text: str) -> None:
                if text != last[0] and not self.json_mode:
                    sys.stderr.write(f"... {text}\n")
                    sys.stderr.flush()
                last[0] = text

            line(message)
            yield line
            return
        with console.status(message) as status:
            yield status.update
