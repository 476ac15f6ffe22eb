"""Key names of the project's DynamoDB tables: one source of truth for the template, code and tests."""

from __future__ import annotations

# Calendar of one-off events (an operator adds rows without a deploy).
CALENDAR_PK = "event_id"

# Audit trail: every change (or deliberate non-change) to the fleet, newest last per endpoint.
AUDIT_PK = "endpoint_name"
AUDIT_SK = "record_id"  # "<ISO-8601 UTC time>#<short unique id>", sorts by time

# Per-endpoint writer leases, one row each: one writer of the same thing at a time. The config lease (UpdateEndpoint,
# weights, promotion, rollback) is the row keyed by the endpoint name itself, as the workflows' ASL writes it; the
# capacity lease (MinCapacity/MaxCapacity, scheduled actions) is keyed by the name + LEASE_CAPACITY_SUFFIX ('#' is
# never in an endpoint name), so a rollout's week-long lease never holds up pre-scaling or an alarm's scale-out.
LEASE_PK = "endpoint_name"
LEASE_CAPACITY_SUFFIX = "#capacity"
LEASE_HOLDER = "holder"
LEASE_EXPIRES_AT = "expires_at"  # epoch seconds (Number)
LEASE_EXECUTION_ARN = "execution_arn"  # a workflow holder's execution, so a rollback can stop the rollout it aborts
LEASE_RETURN_CONFIG = "return_config"  # the endpoint config a rollout started from / a rollback is returning to
# The pointer value a rollback puts back at the end ("" for none); a rollout records the one it started from.
LEASE_RESTORE_POINTER = "restore_pointer"
# Fencing token (Number): +1 on every take, so a writer whose lease was taken over fails its next check.
LEASE_FENCE = "fence"

# Model registry: every model version the fleet has known (SageMaker rollouts and Bedrock imports).
REGISTRY_PK = "model_name"
REGISTRY_SK = "version"  # a SageMaker release's key: the base version, + a digest of its adapter set if any
# The base model's checksum: a release's row is written once, and never again with another base under its key.
REGISTRY_SHA256 = "sha256"

# Approvals (key: sha256 of the approval id) and rollout request records (key: rollout#<execution name>), one table;
# TTL attribute expires_at.
APPROVAL_PK = "approval_key"

# Alarm responder's safety-rail memory (cooldown, actions per hour), one item per endpoint.
REMEDIATION_STATE_PK = "endpoint_name"

# Powertools idempotency (alarm responder): the persistence layer's default attribute names.
IDEMPOTENCY_PK = "id"
IDEMPOTENCY_EXPIRES_AT = "expiration"
