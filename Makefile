# cdc-lake developer commands. `make help` lists them; every target sets itself up.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
ENV ?= dev
# environment.paths.GLUE_WHEELS_DIR
GLUE_WHEELS := build/glue-wheels
GLUE_MODULES := orjson
PYTEST_ARGS ?=
# Test processes, one per core: much of the suite waits on JVMs, PostgreSQL and Kafka rather
# than computing. Tests sharing a session's fixtures share a process, and the groups start in
# collection order (tests/conftest.py puts the shared stack's, the longest, first), not by size.
PYTEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 2)

# jsii prints a banner per process on Node 20; CDK itself works there.
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export PYSPARK_PYTHON := $(abspath $(PY))

.PHONY: help setup demo test durations lint format typecheck unit mutation synth diff deploy plugins rds-ca bench clean

help: ## Show this list of targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}'

JVM_INPUTS := jvm/pom.xml $(wildcard jvm/*/pom.xml) $(wildcard jvm/*/src/main/java/io/cdclake/*/*.java)

setup: $(VENV)/.installed node_modules/.installed jvm/lib/.resolved $(GLUE_WHEELS)/.downloaded ## Create .venv, the pinned CDK CLI, jvm/lib (Hudi, Kafka, Debezium jars from Maven Central) and the Glue job's wheels

# setuptools warns on every editable install with a package-dir mapping (cdclake_merge lives
# under glue_jobs/lib); the import order it warns about is the one the tests rely on.
$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	@command -v javac >/dev/null || { echo "JDK 17 is needed for PySpark and the local stack (apt-get install openjdk-17-jdk-headless)"; exit 1; }
	@compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null || echo "note: the local stack needs Debian's PostgreSQL server (apt-get install postgresql)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	PYTHONWARNINGS='ignore:Editable installation' $(PY) -m pip install --quiet --no-deps -e .
	touch $@

# Every JVM piece the project runs locally is declared in jvm/ and resolved here, never committed.
jvm/lib/.resolved: $(JVM_INPUTS)
	@command -v mvn >/dev/null || { echo "Maven 3.8+ is needed (apt-get install maven)"; exit 1; }
	rm -rf jvm/lib
	mvn -B -q -f jvm/pom.xml package dependency:copy-dependencies -Dmaven.test.skip=true
	touch $@

# The merge job's modules beyond Glue 5.0's own (stacks/components/merge_jobs.py JOB_MODULES),
# at requirements.txt's pins, built for what Glue 5.0 runs (CPython 3.11, manylinux x86_64): a
# deploy ships them and no run installs from PyPI. Never committed; synth fails without them.
$(GLUE_WHEELS)/.downloaded: requirements.txt $(VENV)/.installed
	rm -rf $(GLUE_WHEELS)
	$(PY) -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
	  --python-version 3.11 --implementation cp --dest $(GLUE_WHEELS) \
	  $(foreach m,$(GLUE_MODULES),$(shell grep -i '^$(m)==' requirements.txt | cut -d' ' -f1))
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

demo: setup ## The real pipeline here: PostgreSQL -> Debezium -> Kafka -> S3 -> Hudi, then validate
	$(VENV)/bin/cdclake demo

lint: setup ## Lint and format-check with ruff
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup ## Apply ruff fixes and formatting
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

typecheck: setup ## Type-check every Python package (environment, cdclake, stacks, lambdas, connectors, the merge library and entry, bench, app.py) with mypy
	$(VENV)/bin/mypy

unit: setup ## Run the test suite only (PYTEST_ARGS="-m 'not slow'" to narrow it; PYTEST_WORKERS=0 for one process)
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder $(PYTEST_ARGS)

test: lint typecheck unit ## Lint, type-check and run every test (what CI runs)

durations: ## Refresh tests/durations.json, the order the workers take the tests in, from a run's report (JUNIT=run.xml, pytest --junitxml)
	$(PY) -m tests.workers $(JUNIT)

PART ?= all
MUTATION_MIN_SCORE ?= 95
mutation: setup ## Mutation testing, docs/testing.md (PART=fast: mutmut on the fast modules; PART=targeted: the Spark mutants)
	@case "$(PART)" in all|fast|targeted) ;; *) echo "PART must be all, fast or targeted"; exit 2;; esac
	$(if $(filter all fast,$(PART)),$(PY) tests/mutation/run_fast.py --min-score $(MUTATION_MIN_SCORE))
	$(if $(filter all targeted,$(PART)),$(PY) tests/mutation/run_targeted.py)

synth: setup ## Synthesize every stack of ENV (default dev) into cdk.out, offline (after `make plugins` and `make rds-ca`)
	npx cdk synth -c env=$(ENV) --quiet

diff: setup ## Show what `deploy` would change in ENV (needs AWS credentials)
	npx cdk diff -c env=$(ENV) --all

deploy: setup ## Deploy every stack of ENV (needs AWS credentials and a bootstrapped account)
	npx cdk deploy -c env=$(ENV) --all

plugins: ## Build the MSK Connect plugin zips into connectors/dist; synth uploads them as assets (needs Maven Central, Confluent Hub and GitHub)
	connectors/package_plugins.sh --out connectors/dist

# The bootstrap Lambda and both captures verify Aurora's certificate against this bundle;
# synth of an environment with database.tls_verify (the default) fails without it.
RDS_CA_URL := https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem
RDS_CA_BUNDLE := build/rds-ca/global-bundle.pem

rds-ca: $(RDS_CA_BUNDLE) ## Download the RDS global CA bundle into build/rds-ca (needs the internet)

$(RDS_CA_BUNDLE):
	mkdir -p $(dir $@)
	curl --fail --location --silent --show-error --retry 3 --output $@.tmp $(RDS_CA_URL)
	grep -q -- '-----BEGIN CERTIFICATE-----' $@.tmp || { echo "$(RDS_CA_URL) returned no certificate"; rm -f $@.tmp; exit 1; }
	mv $@.tmp $@

bench: setup ## Run the merge throughput benchmark (figures go to bench/results/)
	$(PY) bench/merge_throughput.py

clean: ## Remove build output, local warehouses and caches (keeps .venv)
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache demo-output spark-warehouse metastore_db derby.log
