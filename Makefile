# One way to run everything: make demo, make test, make lint, make bench.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
SIM    ?= 1
PORT   ?= 8080

.PHONY: venv demo test lint format bench agent-bundle clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,gpu]'
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(PY) -m collector demo --port $(PORT)

test: venv
	$(PY) -m pytest $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: venv
	$(PY) bench/ingest.py
	$(PY) bench/latency.py
	$(PY) bench/agent_overhead.py

agent-bundle: venv
	$(PY) -m collector agent-bundle dist/freezewatch-agent.pyz

clean:
	rm -rf $(VENV) build dist *.egg-info demo-data test-artifacts
