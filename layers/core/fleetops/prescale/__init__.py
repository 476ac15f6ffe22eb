"""Release-calendar pre-scaling: plan scheduled actions from the calendar and reconcile them.

``planner``, ``models`` and ``events`` are pure; ``calendar_table`` is this capability's adapter, and
``reconciler`` applies a plan through it and the shared adapters of :mod:`fleetops.aws`.
"""
