"""PyYAML's safe loader on libyaml's parser where PyYAML has it (its wheels do): the one loader of the YAML files.

The pure-Python parser took several times as long, and the files are read at cold starts. Only what parses a
file imports this (and PyYAML): :func:`fleetops.validation.read_yaml_mapping` when no compiled copy of the file
is fresh (:mod:`fleetops.compiled_yaml`), and the build step that compiles them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import yaml

try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # a PyYAML built without libyaml: the same documents, parsed slower
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]

SafeLoader = _SafeLoader


class UniqueKeySafeLoader(SafeLoader):
    """A safe loader that refuses a key given twice: plain YAML keeps the last one and loses the other silently."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [self.construct_object(key_node, deep=deep) for key_node, _ in node.value]
        twice = sorted({str(k) for k, n in Counter(map(str, keys)).items() if n > 1})
        if twice:
            raise yaml.constructor.ConstructorError(None, None, f"keys given twice: {twice}", node.start_mark)
        return super().construct_mapping(node, deep=deep)
