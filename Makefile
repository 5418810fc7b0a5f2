# flinkwatch: the two commands a new machine needs are `make demo` and `make test`.
# Everything is installed from this repository's own files (pyproject.toml, scripts/).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup prereqs prometheus dfs-servers demo test lint unit bench up down clean

# Python env (pip caches downloads in ~/.cache/pip) + Kafka broker and Spark connector jars
# (Maven caches them in ~/.m2).
# The machine's prerequisites are checked first, all at once, before anything is installed.
# The venv is reinstalled only when pyproject.toml changes, and rebuilt when its pip does
# not run (a venv made while python3-venv was missing).
setup: $(STAMP)
	@scripts/stack.sh fetch

# Python >= 3.11 with venv and ensurepip, Java 17+, Maven; each missing one with its fix.
prereqs:
	@PYTHON=$(PYTHON) scripts/prereqs.sh

# Debian's Prometheus, promtool and Alertmanager (apt; Alertmanager's templates go under
# /usr/share/prometheus) for the tests that run them and the benchmark's peer. The demo
# uses none of them, so only test, unit and bench fetch them.
prometheus: setup
	@scripts/prometheus.sh fetch >/dev/null

# Hadoop's HDFS mini-cluster and s3proxy from Maven Central (117 MB in ~/.m2 and .stack) for
# the tests that keep checkpoints on hdfs:// and s3a://; only test fetches them.
dfs-servers: setup
	@scripts/stack.sh fetch-servers

# setuptools' "Editable installation" notice (a boxed warning that folders named like the
# packages take precedence, which is how this checkout works) is left out of setup's output.
$(STAMP): pyproject.toml | prereqs
	@echo "[setup] creating $(VENV) and installing flinkwatch with its dev tools"
	@PYTHON=$(PYTHON) scripts/venv.sh ensure $(VENV)
	@$(PY) -m pip install --quiet --upgrade pip
	@PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# Local Kafka + a simulated Flink fleet (one job's checkpoints start expiring after 10 s)
# + the streaming job. Alerts are logged and appended to var/demo/alerts.jsonl. Ctrl-C stops.
demo: setup
	@PYTHON=$(abspath $(PY)) scripts/stack.sh up
	@$(PY) -m lab demo --fresh $(DEMO_ARGS)

# Lint, types, then every test (unit, Spark, and integration against a real Kafka broker
# that the tests start on a free port, and a real Prometheus).
# Two workers (pytest-xdist), a test file each at a time: most of the suite's time is real
# processes starting and waiting (brokers, JVMs, Prometheus), which two cores overlap.
test: setup lint prometheus dfs-servers
	@$(VENV)/bin/pytest -n 2 --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

lint: setup
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@$(VENV)/bin/mypy

# The benchmark (not a test; CI does not run it): its own broker, a simulated fleet, the
# full pipeline vs a read-and-count baseline, alert latency, CPU per stage, RSS and state at
# 500 to 20,000 records/s with incidents of every simulated kind, a restart, a one-hour soak
# at 5,000 records/s, a real Prometheus + Alertmanager with equivalent rules, and one
# backlog drained on a local Spark standalone cluster of 1, then 2 workers
# (scripts/spark-cluster.sh). About 2.5 hours; results and the latency/CPU chart in
# bench/results/. BENCH_ARGS=--help
bench: setup prometheus
	@$(VENV)/bin/python -m bench.run $(BENCH_ARGS)

unit: setup prometheus
	@$(VENV)/bin/pytest -m "not spark and not kafka" $(PYTEST_ARGS)

up: setup
	@PYTHON=$(abspath $(PY)) scripts/stack.sh up

down:
	@scripts/stack.sh down

clean: down
	rm -rf var .stack/kafka-*
