"""Every Lambda handler's cold import as deployed vs a bare Powertools handler (target <= 1.3 for each).

Measured on what ``make build`` bundles, not on the development environment: Python 3.13 (Lambda's runtime), the
layer's packages at the versions of its lock (``layers/core/requirements.txt``) with ``fleetops`` and
``fleet_config``, boto3 where the runtime has it, each function's code folder first on the path, and the
environment the template gives the function (references replaced by placeholders). Lambda's code folders are
read-only, so no sample may write bytecode: the function's code and the layer's own part are compiled as
``make build`` compiles them (devtools/bytecode.py), the packages as pip compiles them at install, and the
config's YAML files have their JSON copies (fleetops/compiled_yaml.py). The built layer itself holds arm64
extensions that cannot load on this machine, so the same lock is installed here for this machine's architecture
(``.cache/handler-import``; ``make build`` checks that sam build bundles those versions).

Keys: ``handler_import_ratio__<Function>`` and ``handler_import_ms__<Function>`` per function of template.yaml,
``handler_import_ratio__worst``, ``bare_powertools_import_ms`` (the median over every function's interleaved bare
samples) and ``samples`` per function. ``handler_import_ms_from_source__AlarmResponderFunction`` and
``bare_powertools_import_ms_from_source``: the same two from sources alone, as a build without bytecode (plain
``sam build``) would make Lambda import them at every cold start.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
from pathlib import Path
from typing import Any

from bench._importtime import REPO, import_ratio
from devtools import cfn_yaml
from devtools.bytecode import precompile
from fleetops.compiled_yaml import compile_folder

CACHE = REPO / ".cache" / "handler-import"
LAYER = CACHE / "layer"  # Lambda's /opt/python
FUNCTIONS = CACHE / "functions"  # Lambda's /var/task, one folder per function
RUNTIME = CACHE / "runtime"  # the runtime's own boto3
LOCK = REPO / "layers" / "core" / "requirements.txt"
CONSTRAINTS = REPO / "layers" / "core" / "constraints.txt"
REPEATS = 15


def lambda_python() -> str:
    found = subprocess.run(
        [str(REPO / "devtools" / "find_python.sh"), "3.13"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if not found:
        raise SystemExit("handler_import needs Python 3.13 (Lambda's runtime): see `make build`")
    return found


def install_layer(python: str) -> None:
    """The lock's packages for this machine, plus the layer's own content, as the layer lays them out."""
    stamp = CACHE / "lock.txt"
    if not (stamp.exists() and stamp.read_text() == LOCK.read_text()):
        shutil.rmtree(CACHE, ignore_errors=True)
        pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "--target", str(LAYER), "--require-hashes", "--no-deps", "-r", str(LOCK)], check=True)
        subprocess.run([*pip, "--target", str(RUNTIME), "-c", str(CONSTRAINTS), "boto3"], check=True)
        stamp.write_text(LOCK.read_text())
    for part in ("fleetops", "fleet_config"):
        shutil.rmtree(LAYER / part, ignore_errors=True)
        shutil.copytree(REPO / "layers" / "core" / part, LAYER / part, ignore=shutil.ignore_patterns("__pycache__"))
        precompile(python, LAYER / part)
    compile_folder(LAYER / "fleet_config")


def install_function(python: str, name: str, handler: Path) -> Path:
    """The function's code folder as built, compiled; returns its handler module there."""
    code = FUNCTIONS / name
    shutil.rmtree(code, ignore_errors=True)
    shutil.copytree(handler.parent, code, ignore=shutil.ignore_patterns("__pycache__"))
    precompile(python, code)
    return code / handler.name


def from_source(python: str, name: str, handler: Path, env: dict[str, str]) -> dict[str, float]:
    """One function and the bare handler imported with no bytecode anywhere and no compiled YAML: a plain sam build."""
    layer, code = CACHE / "layer-source", CACHE / "function-source"
    for source, copy in ((LAYER, layer), (handler.parent, code)):
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(source, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.yaml.json"))
    env = {key: value.replace(str(LAYER), str(layer)) for key, value in env.items()}
    measured = import_ratio(code / handler.name, env, REPEATS, python=python, path=(code, layer, RUNTIME))
    return {
        f"handler_import_ms_from_source__{name}": measured["handler_import_ms"],
        "bare_powertools_import_ms_from_source": measured["bare_powertools_import_ms"],
    }


#: The deploy's values of the template's parameters that have no default (samconfig.toml's, README's Deploy).
PARAMETERS = {
    "ModelExecutionRoleArn": "arn:aws:iam::123456789012:role/bench-model",
    "ModelImageRepositoryUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/bench",
}


#: The settings whose defaults name files under the layer's /opt/python (fleetops.settings).
LAYER_FILES = {
    "FLEET_CONFIG_PATH": "/opt/python/fleet_config/fleet.yaml",
    "PLAYBOOK_PATH": "/opt/python/fleet_config/playbook.yaml",
}


def _environment(variables: dict[str, Any], refs: dict[str, str]) -> dict[str, str]:
    env = {}
    for name, value in variables.items():
        try:
            text = str(cfn_yaml.resolve(value, refs))
        except cfn_yaml.UnresolvableError:  # an attribute of a deployed resource (an ARN, a URL): a placeholder
            text = f"arn:aws:bench:us-east-1:123456789012:{name.lower()}"
        env[name] = text.replace("/opt/python", str(LAYER))
    return env


def functions() -> dict[str, tuple[Path, dict[str, str]]]:
    """Each function of template.yaml: its handler module and its environment."""
    template = cfn_yaml.load(REPO / "template.yaml")
    resources = {name: f"bench-{name.lower()}" for name in template["Resources"]}  # what a Ref to each returns
    refs = {**resources, **cfn_yaml.parameter_values(template, PARAMETERS), **cfn_yaml.pseudo_parameters("bench")}
    defaults = template["Globals"]["Function"]["Environment"]["Variables"]
    found = {}
    for name, resource in sorted(cfn_yaml.resources_of_type(template, "AWS::Serverless::Function").items()):
        props = resource["Properties"]
        module = props["Handler"].rpartition(".")[0].replace(".", "/") + ".py"
        variables = {**LAYER_FILES, **defaults, **props.get("Environment", {}).get("Variables", {})}
        found[name] = (REPO / props["CodeUri"] / module, _environment(variables, refs))
    return found


def run() -> dict[str, float]:
    python = lambda_python()
    install_layer(python)
    aws = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}
    lambda_env = {**aws, "PYTHONDONTWRITEBYTECODE": "1"}  # /var/task and /opt are read-only
    results: dict[str, float] = {}
    bare: list[float] = []
    built = functions()
    for name, (source, env) in built.items():
        handler = install_function(python, name, source)
        measured = import_ratio(
            handler, {**env, **lambda_env}, REPEATS, python=python, path=(handler.parent, LAYER, RUNTIME)
        )
        results[f"handler_import_ratio__{name}"] = measured["handler_import_ratio"]
        results[f"handler_import_ms__{name}"] = measured["handler_import_ms"]
        bare.append(measured["bare_powertools_import_ms"])
    results["handler_import_ratio__worst"] = max(v for k, v in results.items() if k.startswith("handler_import_ratio"))
    results["bare_powertools_import_ms"] = round(statistics.median(bare), 2)
    results["samples"] = float(REPEATS)
    source, env = built["AlarmResponderFunction"]
    results |= from_source(python, "AlarmResponderFunction", source, {**env, **lambda_env})
    return results
