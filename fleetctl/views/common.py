"""Pieces every view uses: a plain table style and a titled section."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text


def table(*columns: str) -> Table:
    """A borderless table with a header rule; it reads the same with or without colour."""
    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for column in columns:
        grid.add_column(column, overflow="fold")
    return grid


def section(title: str, body: RenderableType | str) -> Group:
    return Group(Text(title, style="bold underline"), body, Text(""))


def flag(on: bool, on_text: str, off_text: str) -> Text:
    """A state word, red when it is the unusual one."""
    return Text(on_text, style="bold red") if on else Text(off_text, style="green")
