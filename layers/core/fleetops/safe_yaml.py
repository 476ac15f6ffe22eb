"""PyYAML's safe loader on libyaml's parser where PyYAML has it (its wheels do): the one loader of the YAML files.

The pure-Python parser took several times as long, and the files are read at cold starts. Only what reads a
file imports this (and PyYAML, ~10 ms of a cold start): :func:`fleetops.validation.read_yaml_mapping` and the
evaluation suite.
"""

from __future__ import annotations

try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # a PyYAML built without libyaml: the same documents, parsed slower
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]

SafeLoader = _SafeLoader
