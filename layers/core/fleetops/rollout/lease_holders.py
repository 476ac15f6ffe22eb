"""Who holds an endpoint's config lease: the holder names of a rollout and of a rollback.

A rollback may take a rollout's lease over; it tells one from the other by these prefixes.
"""

from __future__ import annotations

#: The rollout's lease holder is this prefix + the rollout id; a rollback may take such a lease over.
ROLLOUT_LEASE_PREFIX = "canary_rollout/"
#: A rollback's own holder (when it does not act as the rollout it aborts) is this prefix + the rollback id.
ROLLBACK_LEASE_PREFIX = "rollback/"
