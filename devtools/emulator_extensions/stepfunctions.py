"""Step Functions' own integration (``arn:aws:states:::states:startExecution[.sync:2]``) fixed for moto 5.2.5.

AWS takes the parameters of this integration in PascalCase (``StateMachineArn``, ``Name``, ``Input``)
as it does for every service; moto's ASL interpreter hands them to botocore unchanged, whose Step
Functions model spells them in camelCase, so the call fails with ``KeyError: 'StateMachineArn'``.
Here the top-level names are converted before the call and back in the answer, as AWS does.
Tests that rely on it say so.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn import (
    StateTaskServiceSfn,
)


def install() -> None:
    """Patch moto's Step Functions task service in this process (idempotent)."""
    if getattr(StateTaskServiceSfn, "_fleet_patched", False):
        return
    original = StateTaskServiceSfn._normalise_parameters

    def _normalise_parameters(self: StateTaskServiceSfn, parameters: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        original(self, parameters, *args, **kwargs)
        for key in [k for k in parameters if k[:1].isupper()]:
            parameters[key[0].lower() + key[1:]] = parameters.pop(key)

    original_eval = StateTaskServiceSfn._eval_service_task
    original_response = StateTaskServiceSfn._normalise_response

    def _pascal(response: Any) -> None:
        if isinstance(response, dict):
            for key in [k for k in response if k[:1].islower()]:
                value = response.pop(key)
                response[key[0].upper() + key[1:]] = value.isoformat() if isinstance(value, datetime) else value

    def _eval_service_task(self: StateTaskServiceSfn, env: Any, *args: Any, **kwargs: Any) -> None:
        original_eval(self, env, *args, **kwargs)
        _pascal(env.stack[-1])  # AWS answers ExecutionArn, StartDate

    def _normalise_response(self: StateTaskServiceSfn, response: Any, *args: Any, **kwargs: Any) -> None:
        original_response(self, response, *args, **kwargs)
        _pascal(response)  # .sync:2 output: Status, Output, ...

    StateTaskServiceSfn._normalise_parameters = _normalise_parameters  # type: ignore[method-assign]
    StateTaskServiceSfn._eval_service_task = _eval_service_task  # type: ignore[method-assign]
    StateTaskServiceSfn._normalise_response = _normalise_response  # type: ignore[method-assign,assignment]
    StateTaskServiceSfn._fleet_patched = True  # type: ignore[attr-defined]
