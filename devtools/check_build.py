"""Checks what ``sam build`` built (``make build``) before anyone deploys it: the artifacts Lambda will run.

- every function's handler module is in its built code and defines the handler;
- the layer holds the project's package and config and exactly the packages of the lock
  (``layers/core/requirements.txt``), at the lock's versions, which are the versions the tests ran with;
- its compiled extensions are built for the template's runtime and architecture (cp313, aarch64 for arm64);
- a function with its layers fits Lambda's 250 MB unzipped limit;
- every module of the layer and of each function has its bytecode for the runtime (devtools.bytecode), and
  every YAML file of the layer's config its fresh JSON copy (fleetops.compiled_yaml).

``python -m devtools.check_build [BUILD_DIR]`` prints one line per finding and exits 1 when there is any.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from devtools import cfn_yaml
from devtools.bytecode import without_bytecode
from fleetops.compiled_yaml import not_compiled

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "layers" / "core" / "requirements.txt"
#: Lambda's limit on a function's deployment package and layers together, unzipped.
UNZIPPED_LIMIT_BYTES = 250 * 1024 * 1024
#: The layer's own content besides its packages.
LAYER_CONTENT = ("fleetops", "fleet_config")
#: Template architecture -> the machine name in a compiled extension's file name.
MACHINES = {"arm64": "aarch64", "x86_64": "x86_64"}

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)", re.MULTILINE)


@dataclass(frozen=True)
class Built:
    """What the check reports on success: the figures a person deploying it wants to see."""

    functions: int
    packages: int
    largest_unzipped_bytes: int


def normalize(name: str) -> str:
    """A distribution name as pip compares them (PEP 503).

    >>> normalize("PyYAML"), normalize("typing_extensions")
    ('pyyaml', 'typing-extensions')
    """
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_versions(lock_text: str) -> dict[str, str]:
    """``name -> version`` for every ``name==version`` line of a pip requirements lock."""
    return {normalize(name): version for name, version in _PIN.findall(lock_text)}


def bundled_versions(site: Path) -> dict[str, str]:
    """``name -> version`` of the distributions installed in ``site`` (their ``.dist-info`` metadata)."""
    found: dict[str, str] = {}
    for dist in metadata.distributions(path=[str(site)]):
        found[normalize(dist.metadata["Name"])] = dist.version
    return found


def size_of(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def _defines(module: Path, name: str) -> bool:
    tree = ast.parse(module.read_text(), filename=str(module))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
    return False


def interpreter_tag(runtime: str) -> str:
    """The tag CPython puts in compiled file names for a Lambda runtime.

    >>> interpreter_tag("python3.13")
    'cpython-313'
    """
    return f"cpython-{runtime.removeprefix('python').replace('.', '')}"


def check_handler(code: Path, handler: str) -> list[str]:
    module, _, function = handler.rpartition(".")
    source = code / (module.replace(".", "/") + ".py")
    if not source.is_file():
        return [f"{code.name}: handler module {source.relative_to(code)} is not in the built code"]
    if not _defines(source, function):
        return [f"{code.name}: {source.name} defines no {function!r} (the handler {handler})"]
    return []


def check_layer(site: Path, locked: dict[str, str], tested: dict[str, str], runtime: str, arch: str) -> list[str]:
    problems = [f"layer: {name}/ is missing" for name in LAYER_CONTENT if not (site / name).is_dir()]
    problems += [
        f"layer: {path.relative_to(site)} has no fresh compiled copy (a cold start would parse it): `make build`"
        for path in not_compiled(site / "fleet_config")
    ]
    bundled = bundled_versions(site)
    for name, version in sorted(locked.items()):
        if name not in bundled:
            problems.append(f"layer: {name}=={version} is locked but not bundled")
        elif bundled[name] != version:
            problems.append(f"layer: {name} {bundled[name]} bundled, the lock says {version}")
        if name in tested and tested[name] != version:
            problems.append(f"layer: {name} {version} locked, but the tests ran with {tested[name]}")
    extra = sorted(set(bundled) - set(locked))
    problems += [f"layer: {name} {bundled[name]} bundled but not in the lock" for name in extra]
    tag = f"{interpreter_tag(runtime)}-{MACHINES.get(arch, arch)}"
    for extension in sorted(site.rglob("*.so")):
        if ".cpython-" in extension.name and tag not in extension.name:
            problems.append(f"layer: {extension.relative_to(site)} is not built for {tag}")
    return problems


def check_bytecode(name: str, tree: Path, runtime: str) -> list[str]:
    missing = without_bytecode(tree, interpreter_tag(runtime))
    if not missing:
        return []
    return [
        f"{name}: {len(missing)} modules without {runtime} bytecode (first: {missing[0].relative_to(tree)}); "
        "Lambda would compile them at every cold start: `make build` compiles them"
    ]


def check(build_dir: Path, lock_text: str, tested: dict[str, str]) -> tuple[list[str], Built]:
    """Every problem with the build in ``build_dir`` (empty when it is fit to deploy), and its figures."""
    template = cfn_yaml.load(build_dir / "template.yaml")
    function_globals: dict[str, Any] = template.get("Globals", {}).get("Function", {})
    layers = cfn_yaml.resources_of_type(template, "AWS::Serverless::LayerVersion")
    functions = cfn_yaml.resources_of_type(template, "AWS::Serverless::Function")
    locked = locked_versions(lock_text)
    problems: list[str] = []
    layer_sizes: dict[str, int] = {}
    for name, layer in layers.items():
        content = build_dir / layer["Properties"]["ContentUri"]
        layer_sizes[name] = size_of(content)
        runtime = layer["Properties"].get("CompatibleRuntimes", [function_globals.get("Runtime", "")])[0]
        arch = layer["Properties"].get("CompatibleArchitectures", function_globals.get("Architectures", ["x86_64"]))[0]
        problems += check_layer(content / "python", locked, tested, runtime, arch)
        problems += check_bytecode(f"layer {name}", content, runtime)
    largest = 0
    for name, function in functions.items():
        props = {**function_globals, **function["Properties"]}
        code = build_dir / props["CodeUri"]
        problems += check_handler(code, props["Handler"])
        problems += check_bytecode(name, code, props["Runtime"])
        refs = [layer.get("Ref") for layer in props.get("Layers", []) if isinstance(layer, dict)]
        unzipped = size_of(code) + sum(layer_sizes.get(str(ref), 0) for ref in refs)
        largest = max(largest, unzipped)
        if unzipped > UNZIPPED_LIMIT_BYTES:
            problems.append(f"{name}: {unzipped / 2**20:.1f} MB unzipped with its layers, over Lambda's 250 MB")
    return problems, Built(len(functions), len(locked), largest)


def main(argv: list[str]) -> int:
    build_dir = Path(argv[0]) if argv else REPO / ".aws-sam" / "build"
    tested = {normalize(d.metadata["Name"]): d.version for d in metadata.distributions()}
    problems, built = check(build_dir, LOCK.read_text(), tested)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(
        f"sam build checked: {built.functions} functions, their handlers present; the layer's {built.packages} "
        f"packages as locked and as tested; every module compiled for the runtime; largest function with its "
        f"layers {built.largest_unzipped_bytes / 2**20:.1f}"
        " MB unzipped (Lambda's limit: 250 MB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
