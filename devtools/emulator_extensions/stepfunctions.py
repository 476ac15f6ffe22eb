"""Parameter casing of Step Functions' service integrations, fixed for moto 5.2.5.

AWS takes and returns PascalCase names for every integration (``StateMachineArn``, ``JobName``,
``$.JobArn``) and maps them to each API's own casing; moto's ASL interpreter hands them to botocore
unchanged, so APIs whose model is camelCase (Step Functions, Bedrock) fail with ``KeyError``.

- ``arn:aws:states:::states:startExecution[.sync:2]``: the top-level names are converted before the call
  and back in the answer.
- ``arn:aws:states:::aws-sdk:<service>:<action>`` for camelCase services (:data:`SDK_CASED_SERVICES`): the
  mapping moto already carries (``_to_boto_request`` / ``_from_boto_response``) is switched on.

And ``StopExecution`` of an execution waiting in a ``.waitForTaskToken`` task: AWS stops it at once; moto
notices only when the wait's heartbeat or timeout runs out (hours, for an approval). Here the stopped
execution's own task-token waits are woken, so it ends ``ABORTED`` straight away, and the error the woken
wait raises cannot turn a stopped execution into a failed one (on AWS it stays aborted).

And speed, not behaviour: moto parses a definition with its ANTLR grammar (pure Python, slow) at
``CreateStateMachine`` and again at every ``StartExecution``; the workflow tests spent a fifth of their CPU there
(measured with py-spy). Each definition's parse tree is kept (:func:`_parse_once`); every execution still builds
its own evaluation components from it, and a definition that does not parse still fails as before.

Tests that rely on it say so.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import botocore.session
from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk import (
    StateTaskServiceAwsSdk,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn import (
    StateTaskServiceSfn,
)
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor
from moto.stepfunctions.parser.utils import camel_to_snake_case

#: boto service names whose API model is camelCase (``aws-sdk:sfn`` is boto's ``stepfunctions``).
SDK_CASED_SERVICES = frozenset({"bedrock", "bedrock-runtime", "stepfunctions"})


def _operation_model(task: StateTaskServiceAwsSdk) -> Any:
    service = botocore.session.get_session().get_service_model(task._get_boto_service_name())
    wanted = task._get_boto_service_action()
    name = next(op for op in service.operation_names if camel_to_snake_case(op) == wanted)
    return service.operation_model(name)


def _sdk_parameters(task: StateTaskServiceAwsSdk, parameters: dict[str, Any], *args: Any, **kwargs: Any) -> None:
    if task._get_boto_service_name() in SDK_CASED_SERVICES:
        task._to_boto_request(parameters, _operation_model(task).input_shape)


def _sdk_response(task: StateTaskServiceAwsSdk, response: Any, *args: Any, **kwargs: Any) -> None:
    if task._get_boto_service_name() in SDK_CASED_SERVICES:
        task._from_boto_response(response, _operation_model(task).output_shape)


def _wake_task_token_waits_on_stop(original: Any) -> Any:
    def set_stop(self: Environment, *args: Any, **kwargs: Any) -> None:
        frames = [self, *getattr(self, "_frames", [])]
        original(self, *args, **kwargs)
        for frame in frames:
            token = frame.states.context_object.context_object_data.get("Task", {}).get("Token")
            endpoint = frame.callback_pool_manager.get(token) if token else None
            if endpoint is not None:
                endpoint.interrupt_all()

    return set_stop


def _unless_stopped(original: Any) -> Any:
    def setter(self: Environment, *args: Any, **kwargs: Any) -> None:
        if not isinstance(self.program_state(), ProgramStopped):
            original(self, *args, **kwargs)

    return setter


def _parse_once(parse: Any) -> Any:
    tree_of = functools.lru_cache(maxsize=256)(lambda definition: parse(definition)[1])  # errors are not kept

    def parse_kept(definition: str) -> tuple[EvalComponent, Any]:  # Any: antlr4's parse tree, untyped
        tree = tree_of(definition)
        return Preprocessor().visit(tree), tree  # fresh components: executions share no state

    return parse_kept


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
    StateTaskServiceAwsSdk._normalise_parameters = _sdk_parameters  # type: ignore[method-assign,assignment]
    StateTaskServiceAwsSdk._normalise_response = _sdk_response  # type: ignore[method-assign,assignment]
    Environment.set_stop = _wake_task_token_waits_on_stop(Environment.set_stop)  # type: ignore[method-assign]
    Environment.set_error = _unless_stopped(Environment.set_error)  # type: ignore[method-assign]
    Environment.set_timed_out = _unless_stopped(Environment.set_timed_out)  # type: ignore[method-assign]
    parse = _parse_once(AmazonStateLanguageParser.parse)
    AmazonStateLanguageParser.parse = staticmethod(parse)  # type: ignore[method-assign]
    StateTaskServiceSfn._fleet_patched = True  # type: ignore[attr-defined]
