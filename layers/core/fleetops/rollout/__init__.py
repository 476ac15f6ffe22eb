"""Canary rollouts: the plan a rollout follows, the canary verdict, approval ids and rollback decisions.

Pure code: no AWS calls here (the adapters live in :mod:`fleetops.aws`). The state machines in
``statemachines/`` execute what these models describe.
"""
