"""Adapter routing (intent/locale -> LoRA adapter) and the start-up compatibility check of the adapters.

vLLM serves several LoRA adapters on one base model only when they fit one LoRA configuration; the
gateway checks at start-up that every adapter has the same rank and target modules, and refuses to
start with a message naming each adapter's rank and targets otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.config import BASE_MODEL, RoutingConfig
from gateway.protocol import ClientError, InvocationRequest

if TYPE_CHECKING:
    from pathlib import Path


class AdapterCompatibilityError(RuntimeError):
    """Adapters are missing, unreadable, or do not share rank and target modules."""


@dataclass(frozen=True)
class AdapterInfo:
    name: str
    path: Path
    rank: int
    target_modules: tuple[str, ...]


def read_adapter(name: str, path: Path) -> AdapterInfo:
    """Read ``adapter_config.json`` (peft's format) of one adapter.

    Raises
    ------
    AdapterCompatibilityError
        If the directory or its config is missing or unreadable.
    """
    config_file = path / "adapter_config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
        targets = config["target_modules"]
        targets = (targets,) if isinstance(targets, str) else tuple(sorted(targets))
        return AdapterInfo(name=name, path=path, rank=int(config["r"]), target_modules=targets)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AdapterCompatibilityError(f"adapter {name!r}: cannot read {config_file}: {exc!r}") from exc


def check_adapters(adapters_dir: Path, names: list[str]) -> dict[str, AdapterInfo]:
    """Load the configured adapters and check that they share rank and target modules.

    Parameters
    ----------
    adapters_dir
        Folder with one sub-folder per adapter (``/opt/ml/model/adapters`` in the image).
    names
        The adapters ``gateway.yaml`` routes to.

    Raises
    ------
    AdapterCompatibilityError
        Listing every adapter's rank and target modules when they differ.

    Examples
    --------
    >>> check_adapters(Path(".cache/tiny-model/adapters"), ["manga_domain", "jp_style"])  # doctest: +SKIP
    {'manga_domain': AdapterInfo(...), 'jp_style': AdapterInfo(...)}
    """
    infos = {name: read_adapter(name, adapters_dir / name) for name in names}
    shapes = {(info.rank, info.target_modules) for info in infos.values()}
    if len(shapes) > 1:
        detail = "; ".join(f"{i.name}: rank {i.rank}, target_modules {list(i.target_modules)}" for i in infos.values())
        raise AdapterCompatibilityError(
            f"LoRA adapters must share rank and target modules to be served together, but they differ: {detail}"
        )
    return infos


class Router:
    """Chooses the adapter for a request.

    An explicit ``adapter`` (or OpenAI ``model``) field wins and must name a served adapter or ``base``;
    otherwise the first route whose intent and locale match; otherwise the configured default.

    Examples
    --------
    >>> from gateway.config import Route
    >>> router = Router(RoutingConfig(adapters=["jp_style"], routes=[Route(locale="ja", adapter="jp_style")]))
    >>> router.resolve(InvocationRequest(messages=[{"role": "user", "content": "hi"}], locale="ja-JP"))
    'jp_style'
    """

    def __init__(self, config: RoutingConfig) -> None:
        self.config = config
        self.valid = sorted({*config.adapters, BASE_MODEL})

    def resolve(self, request: InvocationRequest) -> str:
        """Return the adapter (or ``base``) to serve this request.

        Raises
        ------
        ClientError
            400 ``unknown_adapter`` listing the valid names.
        """
        explicit = request.adapter or request.model
        if explicit is not None:
            if explicit not in self.valid:
                raise ClientError(
                    400,
                    "unknown_adapter",
                    f"unknown adapter {explicit!r}; valid adapters: {', '.join(self.valid)}",
                    valid_adapters=self.valid,
                )
            return explicit
        for route in self.config.routes:
            if route.intent is not None and route.intent != request.intent:
                continue
            if route.locale is not None and not _locale_matches(route.locale, request.locale):
                continue
            return route.adapter
        return self.config.default


def _locale_matches(pattern: str, locale: str | None) -> bool:
    if locale is None:
        return False
    locale, pattern = locale.lower().replace("_", "-"), pattern.lower()
    return locale == pattern or locale.startswith(pattern + "-")
