"""The contract between the halves: what a SageMaker model created by this project carries in its environment.

The rollout writes it onto every model it creates (:meth:`ModelContract.environment`); the GPU container
reads it at start-up (:meth:`ModelContract.from_environment`) and refuses to start, naming every problem,
when something is missing or malformed. Both sides import this module, so a name cannot drift.

================================  ==========================================================================
variable                          meaning
================================  ==========================================================================
``ENDPOINT_NAME``                 the endpoint; the ``EndpointName`` dimension of every metric
``VARIANT_NAME``                  the production variant this model serves; the ``VariantName`` dimension
``MODEL_VERSION``                 the model version, named in every answer (``backend.version``)
``LORA_MODULES``                  the adapters to serve, ``name=path`` separated by spaces (vLLM's
                                  ``--lora-modules`` syntax); a path is relative to the model folder and
                                  must lie inside it. Unset: the adapters the image's ``gateway.yaml`` lists
``SM_VLLM_<FLAG>``                one vLLM engine flag, ``--<flag>`` (the convention of vLLM's own SageMaker
                                  entrypoint), e.g. ``SM_VLLM_MAX_NUM_SEQS=64``; only :class:`EngineKnobs`
================================  ==========================================================================

SageMaker itself tells a container neither its endpoint nor its variant, so a model is bound to one
variant: the rollout creates one model for the canary variant and another for the variant it promotes to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Literal

from pydantic import Field, ValidationError, field_validator

from fleetops.inference_ami import INFERENCE_AMIS, InferenceAmi
from fleetops.sagemaker_names import MAX_NAME, NAME_PATTERN
from fleetops.validation import StrictModel

ENDPOINT_NAME = "ENDPOINT_NAME"
VARIANT_NAME = "VARIANT_NAME"
MODEL_VERSION = "MODEL_VERSION"
LORA_MODULES = "LORA_MODULES"
ENGINE_KNOB_PREFIX = "SM_VLLM_"

#: Variables the contract owns: a rollout request may not set them through its free-form ``environment``.
OWNED = (ENDPOINT_NAME, VARIANT_NAME, MODEL_VERSION, LORA_MODULES)

#: The only variables a rollout request's ``model.environment`` may set, each with why it is safe. The engine
#: and the gateway inherit the whole environment, so anything else could open engine routes or load code.
ALLOWED_ENVIRONMENT: dict[str, str] = {
    "METRICS_INTERVAL_S": "how often the gateway publishes its metrics; changes no route and no limit",
    "BEDROCK_FALLBACK_MODEL_ID": "answer from this Bedrock model when the engine cannot; needs network access",
    "VLLM_LOGGING_LEVEL": "the engine's log level; changes what is logged, not what is served",
    "VLLM_NO_USAGE_STATS": "switches the engine's usage reporting off (it only ever removes a network call)",
    "VLLM_DO_NOT_TRACK": "the same, under the name vLLM also reads",
}

#: Variables refused by name, with what they would do, so that the refusal explains itself.
REFUSED_ENVIRONMENT: dict[str, str] = {
    "VLLM_SERVER_DEV_MODE": "opens the engine's development routes (reset caches, sleep, collective RPC)",
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "opens routes that load and unload LoRA adapters from any path at runtime",
    "VLLM_PLUGINS": "loads Python plugins into the engine",
    "VLLM_ALLOW_INSECURE_SERIALIZATION": "lets the engine unpickle messages (code execution)",
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "lets max_model_len exceed the model's own, past what the budget assumes",
    "VLLM_USE_MODELSCOPE": "fetches models from ModelScope instead of the model artifact",
    "VLLM_LORA_RESOLVER_CACHE_DIR": "lets the engine resolve and load adapters by name at request time",
    "VLLM_LORA_RESOLVER_HF_REPO_LIST": "lets the engine download adapters from the Hugging Face Hub",
    "VLLM_API_KEY": "puts the engine behind a key the gateway does not send",
    "VLLM_HOST_IP": "moves the engine's listening address",
    "VLLM_PORT": "moves the engine's port away from the gateway's",
    "VLLM_RPC_BASE_PATH": "moves the engine's internal sockets",
    "VLLM_CONFIG_ROOT": "reads engine configuration from another folder",
    "VLLM_CACHE_ROOT": "reads compiled kernels and caches from another folder",
    "VLLM_LOGGING_CONFIG_PATH": "loads a logging configuration that can name handler classes to import",
    "VLLM_MODEL_REDIRECT_PATH": "serves another model than the artifact",
    "VLLM_DEBUG_LOG_API_SERVER_RESPONSE": "logs every answer (user data in the logs)",
    "GATEWAY_CONFIG": "replaces the gateway's configuration, its budget and limits included",
    "ENGINE_URL": "points the gateway at another engine than the one it starts",
    "BIND_HOST": "moves the gateway's listening address",
    "PORT": "moves the gateway's port; SageMaker sets SAGEMAKER_BIND_TO_PORT itself",
    "SAGEMAKER_BIND_TO_PORT": "set by SageMaker, never by a request",
    "ENGINE_PORT": "moves the engine's port",
    "MODEL_DIR": "serves another folder than the model artifact SageMaker mounts",
    "ADAPTERS_DIR": "serves adapters from another folder than the model artifact's",
    "PYTHONPATH": "imports code from another folder",
    "PYTHONSTARTUP": "runs a script at interpreter start",
    "LD_PRELOAD": "loads a shared library into every process",
    "LD_LIBRARY_PATH": "loads shared libraries from another folder",
    "HF_TOKEN": "a credential, which does not belong in a model's environment",
}


#: A variant that names no ``InferenceAmiVersion`` runs SageMaker's default: driver 470, CUDA 11.4.
DEFAULT_AMI_CUDA = (11, 4)


def ami_for_cuda(cuda: tuple[int, int]) -> InferenceAmi | None:
    """The oldest documented AMI whose driver runs ``cuda`` natively (of equals, the later image), or ``None``.

    Examples
    --------
    >>> for cuda in ((12, 1), (12, 4), (13, 0)):
    ...     print(ami_for_cuda(cuda).name)
    al2-ami-sagemaker-inference-gpu-2-1
    al2-ami-sagemaker-inference-gpu-3-1
    al2023-ami-sagemaker-inference-gpu-4-1
    >>> ami_for_cuda((14, 0)) is None
    True
    """
    enough = [ami for ami in INFERENCE_AMIS if ami.cuda >= cuda]
    if not enough:
        return None
    lowest = min(ami.cuda for ami in enough)
    return [ami for ami in enough if ami.cuda == lowest][-1]


def environment_problems(env: Mapping[str, str]) -> list[str]:
    """Each variable of a request's ``model.environment`` that is not on :data:`ALLOWED_ENVIRONMENT`.

    Examples
    --------
    >>> environment_problems({"VLLM_LOGGING_LEVEL": "INFO"})
    []
    >>> for problem in environment_problems({"VLLM_SERVER_DEV_MODE": "1", "FOO": "x"}):
    ...     print(problem[:60])
    environment FOO is not allowed (allowed: BEDROCK_FALLBACK_MO
    environment VLLM_SERVER_DEV_MODE is refused: opens the engin
    """
    allowed = ", ".join(sorted(ALLOWED_ENVIRONMENT))
    problems = []
    for name in sorted(env):
        if name in REFUSED_ENVIRONMENT:
            problems.append(f"environment {name} is refused: {REFUSED_ENVIRONMENT[name]}")
        elif name not in ALLOWED_ENVIRONMENT:
            problems.append(f"environment {name} is not allowed (allowed: {allowed})")
    return problems


_ADAPTER_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class ModelContractError(ValueError):
    """The model's environment breaks the contract; the message names every problem, one per line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


class EngineKnobs(StrictModel):
    """The vLLM engine flags a model may set (``SM_VLLM_<FLAG>``); anything else is refused.

    Examples
    --------
    >>> EngineKnobs(max_num_seqs=8, block_size=16).environment()
    {'SM_VLLM_MAX_NUM_SEQS': '8', 'SM_VLLM_BLOCK_SIZE': '16'}
    >>> EngineKnobs(max_num_seqs=8).engine_args()
    ['--max-num-seqs', '8']
    >>> EngineKnobs.from_environment(EngineKnobs(block_size=32, max_num_seqs=8).environment()).block_size
    32
    """

    max_num_seqs: int | None = Field(default=None, ge=1, le=4096, description="concurrent sequences per engine")
    max_model_len: int | None = Field(default=None, ge=64, le=1_048_576, description="prompt + generation tokens")
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    block_size: int | None = Field(default=None, description="KV-cache block size: 8, 16, 32, 64 or 128")
    quantization: (
        Literal["awq", "awq_marlin", "gptq", "gptq_marlin", "fp8", "bitsandbytes", "compressed-tensors"] | None
    ) = None
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] | None = None
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    dtype: Literal["auto", "half", "float16", "bfloat16", "float32"] | None = None

    @field_validator("block_size")
    @classmethod
    def _block_size(cls, value: int | None) -> int | None:
        # An int field, not Literal[8, ...]: a Literal of ints never matches the string an environment holds.
        if value is not None and value not in (8, 16, 32, 64, 128):
            raise ValueError(f"block_size must be 8, 16, 32, 64 or 128, got {value}")
        return value

    def _set(self) -> dict[str, object]:
        return {k: v for k, v in self.model_dump().items() if v is not None}

    def environment(self) -> dict[str, str]:
        """The ``SM_VLLM_*`` variables for the knobs that are set."""
        return {f"{ENGINE_KNOB_PREFIX}{k.upper()}": str(v) for k, v in self._set().items()}

    def engine_args(self) -> list[str]:
        """The vLLM command-line flags for the knobs that are set."""
        args: list[str] = []
        for key, value in self._set().items():
            args += [f"--{key.replace('_', '-')}", str(value)]
        return args

    def over(self, defaults: EngineKnobs) -> EngineKnobs:
        """These knobs, with ``defaults`` filling the ones not set here."""
        return defaults.model_copy(update=self._set())

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> EngineKnobs:
        """Read every ``SM_VLLM_*`` variable.

        Raises
        ------
        ModelContractError
            Names each unknown knob and each malformed value.

        Examples
        --------
        >>> EngineKnobs.from_environment({"SM_VLLM_MAX_NUM_SEQS": "4", "PATH": "/bin"}).max_num_seqs
        4
        >>> EngineKnobs.from_environment({"SM_VLLM_MAX_NUM_SEQ": "4"})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        fleetops.model_contract.ModelContractError: SM_VLLM_MAX_NUM_SEQ: unknown engine knob ...
        """
        raw = {
            k.removeprefix(ENGINE_KNOB_PREFIX).lower(): v for k, v in env.items() if k.startswith(ENGINE_KNOB_PREFIX)
        }
        problems = [
            f"{ENGINE_KNOB_PREFIX}{key.upper()}: unknown engine knob (known: {', '.join(cls.known())})"
            for key in sorted(raw)
            if key not in cls.model_fields
        ]
        known = {k: v for k, v in raw.items() if k in cls.model_fields}
        try:
            knobs = cls.model_validate(known)
        except ValidationError as exc:
            problems += [f"{ENGINE_KNOB_PREFIX}{str(e['loc'][0]).upper()}: {e['msg']}" for e in exc.errors()]
            knobs = cls()
        if problems:
            raise ModelContractError(problems)
        return knobs

    @classmethod
    def known(cls) -> list[str]:
        return [f"{ENGINE_KNOB_PREFIX}{name.upper()}" for name in cls.model_fields]


def format_lora_modules(adapters: Mapping[str, str]) -> str:
    """``name=path`` pairs, sorted by name, separated by spaces.

    Examples
    --------
    >>> format_lora_modules({"jp_style": "adapters/jp_style", "manga_domain": "adapters/manga_domain-v3"})
    'jp_style=adapters/jp_style manga_domain=adapters/manga_domain-v3'
    """
    return " ".join(f"{name}={path}" for name, path in sorted(adapters.items()))


def adapter_problems(adapters: Mapping[str, str]) -> list[str]:
    """What is wrong with an adapter map (names, and paths that must stay inside the model folder).

    Examples
    --------
    >>> adapter_problems({"ok": "adapters/ok", "bad name": "adapters/x", "up": "../etc", "s3": "s3://b/k"})
    ["adapter name 'bad name' must be 1-64 of [A-Za-z0-9._-]", "adapter 'up': path '../etc' must be a relative \
path inside the model folder", "adapter 's3': path 's3://b/k' must be a relative path inside the model folder"]
    """
    problems = []
    for name, path in adapters.items():
        if not _ADAPTER_NAME.fullmatch(name):
            problems.append(f"adapter name {name!r} must be 1-64 of [A-Za-z0-9._-]")
            continue
        pure = PurePosixPath(path)
        if not path or ":" in path or pure.is_absolute() or ".." in pure.parts or any(c.isspace() for c in path):
            problems.append(f"adapter {name!r}: path {path!r} must be a relative path inside the model folder")
    return problems


def parse_lora_modules(value: str) -> dict[str, str]:
    """Parse ``LORA_MODULES``.

    Raises
    ------
    ModelContractError
        Names each malformed entry, duplicate name or path outside the model folder.

    Examples
    --------
    >>> parse_lora_modules("jp_style=adapters/jp_style  manga_domain=adapters/manga_domain-v3")
    {'jp_style': 'adapters/jp_style', 'manga_domain': 'adapters/manga_domain-v3'}
    """
    adapters: dict[str, str] = {}
    problems = []
    for entry in value.split():
        name, sep, path = entry.partition("=")
        if not sep or not name or not path:
            problems.append(f"{LORA_MODULES}: {entry!r} is not name=path")
        elif name in adapters:
            problems.append(f"{LORA_MODULES}: adapter {name!r} named twice")
        else:
            adapters[name] = path
    problems += [f"{LORA_MODULES}: {p}" for p in adapter_problems(adapters)]
    if problems:
        raise ModelContractError(problems)
    return adapters


class ModelContract(StrictModel):
    """Everything the container needs to know about the model and where it serves.

    Examples
    --------
    >>> contract = ModelContract(endpoint_name="manga-chat", variant_name="canary", model_version="v7",
    ...                          adapters={"manga_domain": "adapters/manga_domain"},
    ...                          engine=EngineKnobs(max_num_seqs=64))
    >>> env = contract.environment()
    >>> env["VARIANT_NAME"], env["LORA_MODULES"], env["SM_VLLM_MAX_NUM_SEQS"]
    ('canary', 'manga_domain=adapters/manga_domain', '64')
    >>> ModelContract.from_environment(env) == contract
    True
    >>> ModelContract.from_environment({"ENDPOINT_NAME": "manga-chat"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fleetops.model_contract.ModelContractError: VARIANT_NAME is not set ...; MODEL_VERSION is not set ...
    """

    endpoint_name: str = Field(min_length=1, max_length=MAX_NAME, pattern=NAME_PATTERN)
    variant_name: str = Field(min_length=1, max_length=MAX_NAME, pattern=NAME_PATTERN)
    model_version: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    adapters: dict[str, str] | None = Field(default=None, description="None: the image's default adapters")
    engine: EngineKnobs = EngineKnobs()

    def environment(self) -> dict[str, str]:
        """The model's environment variables for this contract."""
        env = {ENDPOINT_NAME: self.endpoint_name, VARIANT_NAME: self.variant_name, MODEL_VERSION: self.model_version}
        if self.adapters is not None:
            env[LORA_MODULES] = format_lora_modules(self.adapters)
        return env | self.engine.environment()

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> ModelContract:
        """Read the contract from a container's environment.

        Raises
        ------
        ModelContractError
            Names every missing variable, malformed value, bad adapter entry and unknown engine knob.
        """
        problems = []
        hints = {
            ENDPOINT_NAME: "the endpoint this model serves",
            VARIANT_NAME: "the production variant this model serves",
            MODEL_VERSION: "the model version answers name",
        }
        for name, hint in hints.items():
            if not env.get(name):
                problems.append(f"{name} is not set ({hint}; the rollout sets it on every model it creates)")
        adapters: dict[str, str] | None = None
        if env.get(LORA_MODULES) is not None:
            try:
                adapters = parse_lora_modules(env[LORA_MODULES])
            except ModelContractError as exc:
                problems += exc.problems
        try:
            engine = EngineKnobs.from_environment(env)
        except ModelContractError as exc:
            problems += exc.problems
            engine = EngineKnobs()
        # The variables that are set are validated even when others are missing, so every problem is named at once.
        fields = {"endpoint_name": ENDPOINT_NAME, "variant_name": VARIANT_NAME, "model_version": MODEL_VERSION}
        data = {field: env[name] for field, name in fields.items() if env.get(name)}
        contract: ModelContract | None = None
        try:
            contract = cls.model_validate({**data, "adapters": adapters, "engine": engine})
        except ValidationError as exc:
            problems += [
                f"{fields.get(str(e['loc'][0]), e['loc'][0])}: {e['msg']}"
                for e in exc.errors()
                if e["type"] != "missing"  # named above
            ]
        if problems or contract is None:
            raise ModelContractError(problems)
        return contract
