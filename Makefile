# One way to run everything: make demo, make test, make lint, make bench.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
SIM    ?= 1
PORT   ?= 8080
SIM_HOST ?= spark-sim
FREEZE_EVERY ?= 180
CAMPAIGN ?= 1
LAB_HOST ?= spark-lab
# The simulated host (test tooling; the collector only runs the argv it is given).
SIM_ARGS = --simulated-host $(SIM_HOST) --sim-command '["{python}","-m","tests.support.simhost","--collector","{url}","--token","{token:$(SIM_HOST)}","--host-name","$(SIM_HOST)","--data-dir","{data}/sim-$(SIM_HOST)","--freeze-every","$(FREEZE_EVERY)"]'
# A second one behind a throwaway sshd, running a short matrix campaign (needs openssh-server).
LAB_ARGS = --simulated-host $(LAB_HOST) --sim-command '["{python}","-m","tests.support.simlab_demo","--collector","{url}","--token","{token:$(LAB_HOST)}","--host-name","$(LAB_HOST)","--data-dir","{data}/lab-$(LAB_HOST)"]'

.PHONY: venv demo test test-py310 lint format bench agent-bundle clean

# The app (all `make demo` needs) in its own stamp; the test extra goes on top of it.
$(VENV)/.app: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
		{ echo "freezewatch needs Python >= 3.10 (make PYTHON=python3.11 ...)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV) || \
		{ rm -rf $(VENV); echo "cannot create a venv: install python3-venv (Debian/Ubuntu)"; exit 1; }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[gpu]'
	touch $@

$(VENV)/.installed: $(VENV)/.app
	$(PY) -m pip install -q -e '.[test,gpu]'
	touch $@

venv: $(VENV)/.installed

# Ctrl-C stops the collector, the agent and the simulated hosts; SIM=0 leaves them out,
# CAMPAIGN=0 only the matrix campaign's.
demo: $(VENV)/.app
	$(PY) -m collector demo --port $(PORT) $(if $(filter 1,$(SIM)),$(SIM_ARGS) $(if $(filter 1,$(CAMPAIGN)),$(LAB_ARGS)))

# Files spread over TEST_WORKERS processes (most tests wait on real sshd, PostgreSQL, agents
# and Chromium, so more workers than cores pays); TEST_WORKERS=0 runs them in this process.
# Bytecode is cached even where PYTHONDONTWRITEBYTECODE is set: every worker imports every
# test module (pytest's assertion rewriting) and the tests start hundreds of agents and
# collectors, each compiling the same sources again without it.
TEST_WORKERS ?= 4
TEST_ENV = PYTHONDONTWRITEBYTECODE=
test: venv
	$(TEST_ENV) $(PY) -m pytest $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile) $(PYTEST_ARGS)

# The agent and the collector also run on Python 3.10 (requires-python): the agent's and the
# collector's tests, and a real agent and collector talking, on it, in their own venv (PY310:
# a python3.10), their SQLite variants (what differs between Pythons is not the database; the
# 3.11 run has both). The generated API client's test needs openapi-python-client (3.11).
# A venv that is no Python 3.10 with pip (another Python's, or a venv cut short) is made again.
PY310 ?= python3.10
VENV310 ?= .venv310
test-py310:
	$(VENV310)/bin/python -c 'import sys, pip; sys.exit(sys.version_info[:2] != (3, 10))' \
		2>/dev/null || { rm -rf $(VENV310) && $(PY310) -m venv $(VENV310); } || \
		{ rm -rf $(VENV310); echo "cannot make $(VENV310) with $(PY310) (Debian/Ubuntu: python3.10-venv)"; exit 1; }
	$(VENV310)/bin/python -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' || \
		{ rm -rf $(VENV310); echo "$(PY310) is not Python 3.10"; exit 1; }
	$(VENV310)/bin/python -m pip install -q --upgrade pip
	$(VENV310)/bin/python -m pip install -q -e '.[test,gpu]'
	$(TEST_ENV) FREEZEWATCH_TEST_BACKENDS=sqlite $(VENV310)/bin/python -m pytest $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile) \
		$(PYTEST_ARGS) tests/agent tests/collector tests/integration/test_agent_collector.py \
		tests/integration/test_ingest_http.py --ignore=tests/collector/api/test_generated_client.py

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: venv
	$(PY) bench/ingest.py
	$(PY) bench/batch_latency.py
	$(PY) bench/request_cost.py
	$(PY) bench/latency.py
	$(PY) bench/agent_overhead.py
	$(PY) bench/agent_overhead.py --lines-per-s 10
	$(PY) bench/agent_overhead.py --guard
	$(PY) bench/agent_wakeups.py
	$(PY) bench/wakeup.py
	$(PY) bench/burst.py --db sqlite,postgres,null
	$(PY) bench/guard.py
	$(PY) bench/detection.py
	$(PY) bench/netconsole.py
	$(PY) bench/ui.py
	$(PY) bench/replay.py
	$(PY) bench/retention.py
	$(PY) bench/memory.py --minutes 10
	$(PY) bench/fleet.py
	$(PY) bench/peers.py

agent-bundle: $(VENV)/.app
	$(PY) -m collector agent-bundle dist/freezewatch-agent.pyz

clean:
	rm -rf $(VENV) $(VENV310) build dist *.egg-info demo-data test-artifacts
