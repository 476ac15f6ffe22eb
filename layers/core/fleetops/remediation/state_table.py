"""The responder's memory per endpoint (DynamoDB): the safety rails (last scale-out, recent fleet changes) and
the MinCapacity raises waiting to be released (:mod:`fleetops.remediation.raises`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from fleetops.aws import clients
from fleetops.aws.retry import condition_failed
from fleetops.remediation import raises as pure
from fleetops.remediation.actions import ActionType
from fleetops.remediation.rails import RailState
from fleetops.tables import REMEDIATION_STATE_PK

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

    from fleetops.remediation.raises import RaiseRecord

_WINDOW = timedelta(hours=1)  # only the rolling hour matters to the rate limit
#: +1 on every write: the raises are written from outside the lease too (OK transitions, the reconciler).
_VERSION = "item_version"
_ATTEMPTS = 5

Item = dict[str, "AttributeValueTypeDef"]


class StateConflictError(RuntimeError):
    """Other writers kept changing the endpoint's item; raised after a few attempts (the caller's retry decides)."""


def _epoch(at: datetime) -> str:
    return str(int(at.timestamp()))


def _from_epoch(value: str) -> datetime:
    return datetime.fromtimestamp(int(value), tz=UTC)


@dataclass
class _State:
    """One endpoint's item, parsed."""

    rails: RailState = field(default_factory=RailState)
    raises: dict[str, RaiseRecord] = field(default_factory=dict)  # by variant name


def _raise_from(endpoint_name: str, variant_name: str, value: dict[str, AttributeValueTypeDef]) -> RaiseRecord:
    cleared = value.get("cleared_at", {}).get("N")
    return pure.RaiseRecord(
        endpoint_name=endpoint_name,
        variant_name=variant_name,
        min_capacity=int(value["min_capacity"]["N"]),
        raised_at=_from_epoch(value["raised_at"]["N"]),
        alarm_names=frozenset(v["S"] for v in value.get("alarm_names", {}).get("L", [])),
        in_alarm=frozenset(v["S"] for v in value.get("in_alarm", {}).get("L", [])),
        cleared_at=_from_epoch(cleared) if cleared else None,
    )


def _raise_item(record: RaiseRecord) -> AttributeValueTypeDef:
    value: dict[str, AttributeValueTypeDef] = {
        "min_capacity": {"N": str(record.min_capacity)},
        "raised_at": {"N": _epoch(record.raised_at)},
        "alarm_names": {"L": [{"S": name} for name in sorted(record.alarm_names)]},
        "in_alarm": {"L": [{"S": name} for name in sorted(record.in_alarm)]},
    }
    if record.cleared_at is not None:
        value["cleared_at"] = {"N": _epoch(record.cleared_at)}
    return {"M": value}


def _parse(endpoint_name: str, item: Item) -> _State:
    last = item.get("last_scale_out_at", {}).get("N")
    times = tuple(_from_epoch(v["N"]) for v in item.get("action_times", {}).get("L", []))
    raises = {
        variant: _raise_from(endpoint_name, variant, value["M"])
        for variant, value in item.get("raises", {}).get("M", {}).items()
    }
    return _State(RailState(last_scale_out_at=_from_epoch(last) if last else None, recent_actions=times), raises)


def _item(endpoint_name: str, state: _State) -> Item:
    item: Item = {
        REMEDIATION_STATE_PK: {"S": endpoint_name},
        "action_times": {"L": [{"N": _epoch(t)} for t in state.rails.recent_actions]},
    }
    if state.rails.last_scale_out_at is not None:
        item["last_scale_out_at"] = {"N": _epoch(state.rails.last_scale_out_at)}
    if state.raises:
        item["raises"] = {"M": {variant: _raise_item(r) for variant, r in sorted(state.raises.items())}}
    return item


class RemediationStateStore:
    """One item per endpoint: the rails (``last_scale_out_at``, ``action_times``: epoch seconds, last hour
    only) and ``raises`` (one map per raised variant).

    Every write is a read-modify-write conditioned on the item's version, retried when another writer got
    there first: the rails are written under the endpoint lease, but the raises are also written on OK
    transitions and by the pre-scale reconciler, and none of them may lose another's change.

    Examples
    --------
    >>> class DynamoDB:  # in-memory stand-in for the two calls made: one item per key (conditions not checked)
    ...     def __init__(self):
    ...         self.items = {}
    ...     def put_item(self, TableName, Item, **condition):
    ...         self.items[Item[REMEDIATION_STATE_PK]["S"]] = Item
    ...     def get_item(self, TableName, Key, ConsistentRead):
    ...         found = self.items.get(Key[REMEDIATION_STATE_PK]["S"])
    ...         return {"Item": found} if found else {}
    >>> store = RemediationStateStore("remediation-state", client=DynamoDB())
    >>> at = datetime(2026, 11, 21, 19, 2, tzinfo=UTC)
    >>> store.record("manga-chat", ActionType.ROLLBACK, at - timedelta(hours=2)).last_scale_out_at is None
    True
    >>> _ = store.record("manga-chat", ActionType.SCALE_OUT, at)
    >>> state = store.get("manga-chat")  # the rollback two hours ago has left the rolling hour
    >>> state.last_scale_out_at == at, len(state.recent_actions)
    (True, 1)

    A scale-out's raise, and its alarm going OK; the pre-scale reconciler releases it after the hold time:

    >>> _ = store.record_raise("manga-chat", "primary", "queue-depth-alarm", 8, at)
    >>> store.record_clear("manga-chat", "primary", "queue-depth-alarm", at + timedelta(minutes=5)).cleared_at
    datetime.datetime(2026, 11, 21, 19, 7, tzinfo=datetime.timezone.utc)
    >>> [(r.variant_name, r.min_capacity) for r in store.raises("manga-chat")]
    [('primary', 8)]
    >>> store.forget_raise("manga-chat", "primary"), store.raises("manga-chat"), store.get("manga-chat") == state
    (True, [], True)
    """

    def __init__(self, table_name: str, client: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._client: DynamoDBClient = client or clients.client("dynamodb")

    # --- reading ---

    def _read(self, endpoint_name: str) -> Item | None:
        return self._client.get_item(
            TableName=self._table,
            Key={REMEDIATION_STATE_PK: {"S": endpoint_name}},
            ConsistentRead=True,
        ).get("Item")

    def get(self, endpoint_name: str) -> RailState:
        item = self._read(endpoint_name)
        return _parse(endpoint_name, item).rails if item else RailState()

    def raises(self, endpoint_name: str) -> list[RaiseRecord]:
        """The endpoint's standing raises, one per variant (sorted by variant name).

        The pre-scale reconciler releases each one for which
        :func:`~fleetops.remediation.raises.release_due` holds.
        """
        item = self._read(endpoint_name)
        state = _parse(endpoint_name, item) if item else _State()
        return [state.raises[v] for v in sorted(state.raises)]

    # --- writing ---

    def _update(self, endpoint_name: str, change: Callable[[_State], bool]) -> _State:
        """Read, let ``change`` edit the state (it returns whether it changed anything), write if it did."""
        for _ in range(_ATTEMPTS):
            item = self._read(endpoint_name)
            state = _parse(endpoint_name, item) if item else _State()
            if not change(state):
                return state
            seen = (item or {}).get(_VERSION, {}).get("N")
            new = _item(endpoint_name, state)
            new[_VERSION] = {"N": str(int(seen or 0) + 1)}
            try:
                self._put_if_version(new, seen)
            except Exception as exc:
                if not condition_failed(exc):
                    raise
                continue
            return state
        raise StateConflictError(f"remediation state of {endpoint_name!r} kept changing; gave up after {_ATTEMPTS}")

    def _put_if_version(self, item: Item, seen: str | None) -> None:
        names = {"#v": _VERSION}
        if seen is None:
            self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression="attribute_not_exists(#v)",
                ExpressionAttributeNames=names,
            )
        else:
            self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression="#v = :seen",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={":seen": {"N": seen}},
            )

    def record(self, endpoint_name: str, action: ActionType, at: datetime) -> RailState:
        """Remember one applied fleet change at ``at`` (the event's time); returns the new state."""

        def change(state: _State) -> bool:
            rails = state.rails
            times = (*(t for t in rails.recent_actions if t > at - _WINDOW), at)
            last = at if action == ActionType.SCALE_OUT else rails.last_scale_out_at
            state.rails = RailState(last_scale_out_at=last, recent_actions=times)
            return True

        return self._update(endpoint_name, change).rails

    def _change_raise(
        self, endpoint_name: str, variant_name: str, edit: Callable[[RaiseRecord | None], RaiseRecord | None]
    ) -> _State:
        def change(state: _State) -> bool:
            before = state.raises.get(variant_name)
            after = edit(before)
            if after == before:
                return False
            if after is None:
                del state.raises[variant_name]
            else:
                state.raises[variant_name] = after
            return True

        return self._update(endpoint_name, change)

    def record_raise(
        self, endpoint_name: str, variant_name: str, alarm_name: str, min_capacity: int, at: datetime
    ) -> RaiseRecord:
        """Remember that ``alarm_name`` made the responder set the variant's MinCapacity to ``min_capacity``.

        The responder calls it just before the change, so that a raise is never left unrecorded; a change
        that then fails leaves a record whose release only restores the plan's level.
        """

        def edit(record: RaiseRecord | None) -> RaiseRecord:
            return pure.raised(
                record,
                endpoint_name=endpoint_name,
                variant_name=variant_name,
                alarm_name=alarm_name,
                min_capacity=min_capacity,
                at=at,
            )

        return self._change_raise(endpoint_name, variant_name, edit).raises[variant_name]

    def record_alarm(self, endpoint_name: str, variant_name: str, alarm_name: str) -> RaiseRecord | None:
        """``alarm_name`` went ALARM without raising anything: a standing raise waits for it too (see
        :func:`~fleetops.remediation.raises.alarmed`). Nothing is written when the variant has no raise."""
        return self._change_raise(endpoint_name, variant_name, lambda r: pure.alarmed(r, alarm_name)).raises.get(
            variant_name
        )

    def record_clear(self, endpoint_name: str, variant_name: str, alarm_name: str, at: datetime) -> RaiseRecord | None:
        """``alarm_name`` went OK at ``at``; returns the variant's raise (``cleared_at`` set once none is in
        ALARM), or ``None`` when it has none."""
        state = self._change_raise(endpoint_name, variant_name, lambda r: pure.cleared(r, alarm_name, at))
        return state.raises.get(variant_name)

    def forget_raise(self, endpoint_name: str, variant_name: str, released: RaiseRecord | None = None) -> bool:
        """Drop the variant's raise once the reconciler has set MinCapacity back; returns whether it did.

        Pass the record the release was decided on as ``released``: when the raise changed since (a new
        ALARM, a new raise), it is kept, and the next run decides again.
        """
        forgotten = False

        def edit(record: RaiseRecord | None) -> RaiseRecord | None:
            nonlocal forgotten
            forgotten = record is not None and (released is None or record == released)
            return None if forgotten else record

        self._change_raise(endpoint_name, variant_name, edit)
        return forgotten
