"""``python -m fleetctl``: the same as the installed ``fleetctl`` command."""

from fleetctl.cli import run

run()
