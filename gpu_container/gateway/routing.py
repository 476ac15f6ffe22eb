"""Adapter routing (intent/locale -> LoRA adapter) and the start-up check of the adapters served.

The adapters served are the model's ``LORA_MODULES`` (paths inside the model folder) or, when it is
unset, ``routing.adapters`` of ``gateway.yaml`` under ``ADAPTERS_DIR``. vLLM serves several LoRA
adapters on one base model only when they fit one LoRA configuration; the gateway checks at start-up
that every adapter is there and that all share rank and target modules, and that every route of
``gateway.yaml`` leads to an adapter served; otherwise it refuses to start, naming each problem.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleetops.model_contract import LORA_MODULES
from gateway.config import BASE_MODEL, GatewayConfigError, RoutingConfig
from gateway.errors import ErrorCode, GatewayError
from gateway.protocol import InvocationRequest

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from gateway.config import Environment


class AdapterCompatibilityError(RuntimeError):
    """Adapters are missing, unreadable, or do not share rank and target modules; ``problems`` names each."""

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


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
    except OSError as exc:
        reason = exc.strerror or repr(exc)
    except (ValueError, KeyError, TypeError) as exc:
        reason = repr(exc)
    raise AdapterCompatibilityError(f"adapter {name!r}: cannot read {config_file}: {reason}")


def served_adapters(env: Environment, routing: RoutingConfig) -> dict[str, Path]:
    """The adapters to serve: ``LORA_MODULES`` under the model folder, else ``routing.adapters`` under ADAPTERS_DIR.

    Examples
    --------
    >>> from gateway.config import Environment
    >>> contract = {"ENDPOINT_NAME": "e", "VARIANT_NAME": "v", "MODEL_VERSION": "1", "MODEL_DIR": "/opt/ml/model"}
    >>> served_adapters(Environment.from_env(contract), RoutingConfig(adapters=["jp_style"]))
    {'jp_style': PosixPath('/opt/ml/model/adapters/jp_style')}
    >>> env = Environment.from_env({**contract, "LORA_MODULES": "manga=adapters/manga-v3"})
    >>> served_adapters(env, RoutingConfig(adapters=["jp_style"]))
    {'manga': PosixPath('/opt/ml/model/adapters/manga-v3')}
    """
    modules = env.contract.adapters
    if modules is None:
        return {name: env.resolved_adapters_dir / name for name in routing.adapters}
    # The contract has checked each path is relative without "..", so joining keeps it inside the model folder.
    return {name: env.model_dir / path for name, path in modules.items()}


def routing_for(routing: RoutingConfig, served: Mapping[str, object], source: str) -> RoutingConfig:
    """``gateway.yaml``'s routing with the adapters actually served; every route must lead to one of them.

    Parameters
    ----------
    routing
        The file's routing section.
    served
        The adapters served (see :func:`served_adapters`); one named nowhere in the file is still
        reachable through a request's explicit ``adapter``/``model`` field.
    source
        Where ``served`` came from, for the message (``LORA_MODULES`` or ``routing.adapters``).

    Raises
    ------
    GatewayConfigError
        Naming each route (and the default) that leads to an adapter not served.

    Examples
    --------
    >>> from gateway.config import Route
    >>> routing = RoutingConfig(adapters=["jp_style"], routes=[Route(locale="ja", adapter="jp_style")])
    >>> routing_for(routing, {"jp_style": None, "manga": None}, "LORA_MODULES").adapters
    ['jp_style', 'manga']
    >>> routing_for(routing, {"manga": None}, "LORA_MODULES")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    gateway.config.GatewayConfigError: routing.routes[0] (locale ja) leads to adapter 'jp_style', which ...
    """
    valid = {*served, BASE_MODEL}
    listed = ", ".join(sorted(valid))
    problems = []
    for index, route in enumerate(routing.routes):
        if route.adapter not in valid:
            when = ", ".join(f"{k} {v}" for k, v in (("intent", route.intent), ("locale", route.locale)) if v)
            problems.append(
                f"routing.routes[{index}] ({when}) leads to adapter {route.adapter!r}, which {source} does not serve "
                f"(served: {listed})"
            )
    if routing.default not in valid:
        problems.append(
            f"routing.default is adapter {routing.default!r}, which {source} does not serve (served: {listed})"
        )
    if problems:
        raise GatewayConfigError(problems)
    return routing.model_copy(update={"adapters": sorted(served)})


def check_adapters(adapters: Mapping[str, Path]) -> dict[str, AdapterInfo]:
    """Read every adapter served and check that they share rank and target modules.

    Parameters
    ----------
    adapters
        Name -> folder of each adapter (see :func:`served_adapters`).

    Raises
    ------
    AdapterCompatibilityError
        Naming every adapter that is missing or unreadable, or listing every adapter's rank and target
        modules when they differ.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> def write_adapter(folder: Path, rank: int) -> Path:  # what peft saves, as far as it is read
    ...     folder.mkdir()
    ...     config = {"r": rank, "target_modules": ["v_proj", "q_proj"]}
    ...     _ = (folder / "adapter_config.json").write_text(json.dumps(config))
    ...     return folder
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     infos = check_adapters({"manga_domain": write_adapter(Path(tmp, "m"), 8),
    ...                             "jp_style": write_adapter(Path(tmp, "j"), 8)})
    ...     check_adapters({"manga_domain": Path(tmp, "m"), "jp_style": write_adapter(Path(tmp, "j16"), 16)})
    Traceback (most recent call last):
    ...
    gateway.routing.AdapterCompatibilityError: LoRA adapters must share rank ... rank 8, ...; jp_style: rank 16, ...
    >>> {name: (info.rank, info.target_modules) for name, info in infos.items()}
    {'manga_domain': (8, ('q_proj', 'v_proj')), 'jp_style': (8, ('q_proj', 'v_proj'))}
    """
    infos: dict[str, AdapterInfo] = {}
    problems: list[str] = []
    for name, path in adapters.items():
        try:
            infos[name] = read_adapter(name, path)
        except AdapterCompatibilityError as exc:
            problems += exc.problems
    shapes = {(info.rank, info.target_modules) for info in infos.values()}
    if len(shapes) > 1:
        detail = "; ".join(f"{i.name}: rank {i.rank}, target_modules {list(i.target_modules)}" for i in infos.values())
        problems.append(
            f"LoRA adapters must share rank and target modules to be served together, but they differ: {detail}"
        )
    if problems:
        raise AdapterCompatibilityError(problems)
    return infos


def adapter_source(env: Environment) -> str:
    """Where the adapters served come from, as named in start-up messages."""
    return LORA_MODULES if env.contract.adapters is not None else "routing.adapters"


class Router:
    """Chooses the adapter for a request.

    An explicit ``adapter`` (or OpenAI ``model``) field wins and must name a served adapter or ``base``;
    otherwise the first route whose intent and locale match (a request without an ``intent`` gets one from
    its words, :meth:`intent_of`); otherwise the configured default.

    Examples
    --------
    >>> from gateway.config import Route
    >>> routes = [Route(intent="shipping", adapter="support"), Route(locale="ja", adapter="jp_style")]
    >>> config = RoutingConfig(adapters=["jp_style", "support"], routes=routes,
    ...                        intent_keywords={"ja": {"shipping": ["配送"]}})
    >>> router = Router(config)
    >>> router.resolve(InvocationRequest(messages=[{"role": "user", "content": "こんにちは"}], locale="ja-JP"))
    'jp_style'
    >>> router.resolve(InvocationRequest(messages=[{"role": "user", "content": "配送はいつ?"}], locale="ja-JP"))
    'support'
    """

    def __init__(self, config: RoutingConfig) -> None:
        self.config = config
        self.valid = sorted({*config.adapters, BASE_MODEL})
        self._keywords = {
            locale.lower(): [(intent, [_keyword_pattern(word) for word in words]) for intent, words in intents.items()]
            for locale, intents in config.intent_keywords.items()
        }

    def intent_of(self, request: InvocationRequest) -> str | None:
        """The request's own intent, else the first intent one of whose keywords its last user message holds.

        The keywords of the request's locale (matched by prefix, as routes are), of every locale when it
        names none; ``None`` when no keyword is there.
        """
        if request.intent is not None:
            return request.intent
        question = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        text = unicodedata.normalize("NFKC", question).casefold()
        for locale, intents in self._keywords.items():
            if request.locale is not None and not _locale_matches(locale, request.locale):
                continue
            for intent, patterns in intents:
                if any(pattern.search(text) for pattern in patterns):
                    return intent
        return None

    def resolve(self, request: InvocationRequest) -> str:
        """Return the adapter (or ``base``) to serve this request.

        Raises
        ------
        GatewayError
            ``unknown_adapter``, listing the valid names.
        """
        explicit = request.adapter or request.model
        if explicit is not None:
            if explicit not in self.valid:
                raise GatewayError(
                    ErrorCode.UNKNOWN_ADAPTER,
                    f"unknown adapter {explicit!r}; valid adapters: {', '.join(self.valid)}",
                    valid_adapters=self.valid,
                )
            return explicit
        intent = self.intent_of(request)
        for route in self.config.routes:
            if route.intent is not None and route.intent != intent:
                continue
            if route.locale is not None and not _locale_matches(route.locale, request.locale):
                continue
            return route.adapter
        return self.config.default


def _keyword_pattern(word: str) -> re.Pattern[str]:
    """A keyword as a pattern: any run of spaces matches any other; a Latin one only at the start of a word."""
    folded = unicodedata.normalize("NFKC", word).casefold().strip()
    body = r"\s+".join(map(re.escape, folded.split()))
    return re.compile((r"(?<![a-z0-9])" if folded[:1].isascii() and folded[:1].isalnum() else "") + body)


def _locale_matches(pattern: str, locale: str | None) -> bool:
    if locale is None:
        return False
    locale, pattern = locale.lower().replace("_", "-"), pattern.lower()
    return locale == pattern or locale.startswith(pattern + "-")
