"""Shared core of the manga-assistant LLM fleet: models, pure decisions and thin AWS adapters."""

from pathlib import Path

#: The shipped configuration, beside this package wherever it is: ``layers/core/fleet_config`` in a checkout,
#: ``/opt/python/fleet_config`` in the Lambda layer, ``site-packages/fleet_config`` where fleetctl is installed.
SHIPPED_CONFIG_DIR = Path(__file__).resolve().parents[1] / "fleet_config"
