# `make demo` installs everything into .venv and runs Hogwild end to end;
# `make test` installs and runs the lint and the whole test suite;
# `make reliability` runs each synchronous example 30 times (about 15 min);
# `make faults` kills a random task of every example at a random moment, 5
# runs each (tens of minutes), and reports what survived;
# `make bench` compares every scheme (about 13 min), `make bench-quick` four
# (about 90 s).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: venv demo test lint reliability faults bench bench-quick clean

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt benchmarks/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --upgrade --target $(VENV)/benchmark-packages \
		-r benchmarks/requirements.txt
	touch $@

demo: venv
	bash Hogwild/run.sh

lint: venv
	$(PY) -m ruff check .

test: lint
	$(PY) -m pytest

# Not part of `make test`: 30 back-to-back runs of each synchronous example.
reliability: venv
	$(PY) tests/reliability.py

# Not part of `make test` either: random kills with --max_restarts 3.
faults: venv
	$(PY) tests/faults.py

# Not part of `make test` either: the benchmark, and its quick version.
bench: venv
	$(PY) benchmarks/compare.py

bench-quick: venv
	$(PY) benchmarks/compare.py --quick

clean:
	rm -rf $(VENV) */runs runs benchmarks/results/runs benchmarks/results/logs benchmarks/results-quick
