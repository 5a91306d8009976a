# `make demo` installs everything into .venv and runs Hogwild end to end;
# `make test` installs and runs the lint and the whole test suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: venv demo test lint clean

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

demo: venv
	bash Hogwild/run.sh

lint: venv
	$(PY) -m ruff check .

test: lint
	$(PY) -m pytest

clean:
	rm -rf $(VENV) */runs runs
