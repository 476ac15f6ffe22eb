"""Canary rollouts: the plan a rollout follows, the canary checks and verdict, approvals and rollback decisions.

The pure core (``plan``, ``checks``, ``analysis``, ``approval``, ``approval_gate``, ``prepare``, ``rollback``)
makes no AWS calls; this capability's adapters (``approval_table``, ``canary_metrics``, ``model_pointer``,
``task_callback``) do, and shared ones live in :mod:`fleetops.aws`. The state machines in ``statemachines/``
execute what these models describe.
"""
