# `make demo` installs everything into .venv and runs Hogwild end to end;
# `make test` installs and runs the lint and the test suite (the longer
# suites have targets of their own, below, which CI also runs);
# `make reliability` runs each synchronous example 30 times, then 30 more
# under CPU load (about two hours);
# `make bench` runs every example with its defaults on MNIST (about 10 min;
# `make bench DATA_DIR=folder`, else the Keras cache); `make bench-synthetic`
# compares every scheme on the same work on the synthetic data (about 13
# min), `make bench-quick` three of them and the baseline (about 2 min); `make tensorboard`
# shows every example's runs/;
# `make ui-test` checks TensorBoard in headless Chromium (about 3 min);
# `make test-ray` runs Multi-Worker-Mirrored-Strategy under Ray Train on a
# two-node Ray cluster (needs root; `make ray` installs Ray alone);
# `make test-simulator` checks the simulator (python -m simulator), which
# `make simgrid` makes the venv able to run;
# `make faults` kills a random task of every example at a random moment, 5
# runs each (tens of minutes), and reports what survived (`make faults
# WORKERS=16`: with 16 workers).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: venv tools demo test lint reliability faults bench bench-synthetic \
	bench-quick bench-network bench-startup bench-steps bench-scale bench-thesis \
	bench-simulator \
	test-bench tensorboard ui-test ray test-ray test-real-data test-waits \
	test-sessions test-users-path test-load test-recovery test-network test-scale \
	simgrid test-simulator clean

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt benchmarks/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --upgrade --target $(VENV)/benchmark-packages \
		-r benchmarks/requirements.txt
	touch $@

demo: venv tools
	bash Hogwild/run.sh

lint: venv
	$(PY) -m ruff check .

# iproute2: ip sets up the job's network (--network private and hosts), so
# every target that runs an example needs it; tc shapes its links (--bandwidth).
tools:
	@command -v ip >/dev/null && command -v tc >/dev/null || { \
		apt-get update -qq && apt-get install -y -qq iproute2 >/dev/null; }

# SimGrid's Python bindings, for the simulator (python -m simulator): Debian's
# python3-simgrid, built for the system's Python 3.11. A link to its one
# module in the venv's site-packages lets .venv (Python 3.11 too) import it
# without seeing the rest of the system's packages.
SIMGRID_MODULE = $(firstword $(wildcard /usr/lib/python3/dist-packages/simgrid.cpython-*.so))
simgrid: venv
	@test -n "$(SIMGRID_MODULE)" || { apt-get update -qq && \
		apt-get install -y -qq python3-simgrid >/dev/null; }
	@$(PY) -c "import simgrid" 2>/dev/null || { \
		module=$$(ls /usr/lib/python3/dist-packages/simgrid.cpython-*.so) && \
		ln -sf "$$module" "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/" && \
		$(PY) -c "import simgrid" 2>/dev/null || { echo "python3-simgrid's \
		$$module is not for .venv's Python; make .venv with Python 3.11" >&2; exit 2; }; }

# Three test processes: on two cores a run's tasks mostly wait on each other.
# The restart tests and the network's have targets of their own, to keep
# this one short.
NETWORK_TESTS := tests/test_traffic.py tests/test_hosts.py tests/test_network.py
test: lint tools
	$(PY) -m pytest -n 3 --ignore=tests/test_recovery.py \
		--ignore=tests/test_simulator.py \
		$(foreach file,$(NETWORK_TESTS),--ignore=$(file))

# Not part of `make test` (about a minute): the simulator's timing against
# the formulas, every scheme learning in it, its defaults and bad input
# (tests/test_simulator.py).
test-simulator: venv simgrid
	$(PY) -m pytest -p no:cacheprovider -n 3 tests/test_simulator.py

# Not part of `make test` (about a minute and a half): tasks killed and
# restarted, on separate disks (tests/test_recovery.py).
test-recovery: venv tools
	$(PY) -m pytest -p no:cacheprovider -n 3 tests/test_recovery.py

# Not part of `make test` (about a minute): the job's network namespaces,
# a host and a disk per task, and the bytes on the wire against the graph's.
test-network: venv tools
	$(PY) -m pytest -p no:cacheprovider -n 3 $(NETWORK_TESTS)

# Not part of `make test`: 30 back-to-back runs of each synchronous example,
# then 30 more of 200 steps each with the job held to half a CPU (needs root).
reliability: venv tools
	$(PY) tests/reliability.py
	$(PY) tests/reliability.py --cpus 0.5 --steps 200 --timeout 300

# Not part of `make test` (about six minutes): every example through its
# run.sh, each task a new Python, the whole job held to half a CPU's worth of
# time in bursts (a cgroup quota, tests/load.py; needs root).
test-load: venv tools
	$(PY) -m pytest -p no:cacheprovider -n 3 tests/load_suite

# Not part of `make test` (about fifteen minutes): every example with 16
# workers, the synchronous ones and Dynamic-SGD with 40, one job at a time
# (a 40-worker job takes most of the memory), as `bash run.sh --workers N`
# starts them (tests/scale).
test-scale: venv tools
	$(PY) -m pytest -p no:cacheprovider tests/scale

# Not part of `make test` either: random kills with --max_restarts 3.
faults: venv tools
	$(PY) tests/faults.py $(if $(WORKERS),--workers $(WORKERS))

# Not part of `make test` either: the benchmark tool's suites (benchmarks/
# suites/; `python -m benchmarks --help` lists them with what each costs).
# Each adds to benchmarks/results/SUITE/runs.jsonl and writes its report;
# a run already recorded for the same code is skipped (ARGS=--rerun), so a
# stopped suite resumes. ARGS passes flags: ARGS="--schemes Hogwild --workers 4".
BENCH = $(PY) -m benchmarks run
MNIST_FLAGS = $(if $(DATA_DIR),--data_dir $(DATA_DIR))
bench: venv tools
	$(BENCH) mnist $(MNIST_FLAGS) $(ARGS)

bench-synthetic: venv tools
	$(BENCH) synthetic $(ARGS)

bench-quick: venv tools
	$(BENCH) quick $(ARGS)

bench-network: venv tools
	$(BENCH) network $(MNIST_FLAGS) $(ARGS)

bench-startup: venv tools
	$(BENCH) startup $(ARGS)

# Hours each: every scheme at 2 to 40 workers (about 2.5 h), and the AGN
# thesis's grid (about 10 h). Both resume where they stopped, even after
# the code changed.
bench-scale: venv tools
	$(BENCH) scale $(MNIST_FLAGS) $(ARGS)

bench-thesis: venv tools
	$(BENCH) thesis $(MNIST_FLAGS) $(ARGS)

# Where a step's time goes: benchmarks/step_trace.py, stored (about 1 min).
bench-steps: venv
	$(BENCH) steps $(ARGS)

# The simulator's validation: the scale suite's runs played by
# `python -m simulator --machine this` (no TensorFlow; about 30 min).
bench-simulator: venv simgrid
	$(BENCH) simulator $(MNIST_FLAGS) $(ARGS)

# Not part of `make test` (about 3 minutes): the benchmark tool end to end,
# a failed run recorded and the suite going on (tests/bench_suite), then the
# quick suite into a fresh folder and its report written again.
test-bench: venv tools
	$(PY) -m pytest -p no:cacheprovider tests/bench_suite
	rm -rf $(VENV)/bench-quick
	$(BENCH) quick --out $(VENV)/bench-quick
	$(PY) -m benchmarks report $(VENV)/bench-quick

# TensorBoard on 127.0.0.1, a free port, over every example's runs/.
tensorboard: venv
	$(PY) guide/board.py

# Not part of `make test`: TensorBoard in a real browser. Needs Debian's
# chromium and chromium-driver (the test says how to install them); Selenium
# goes into its own folder, as the benchmark's packages do.
ui-test: venv tools
	$(PY) -m pip install --quiet --upgrade --target $(VENV)/ui-packages \
		-r tests/ui/requirements.txt
	$(PY) -m pytest -p no:cacheprovider tests/ui

# Ray Train for Multi-Worker-Mirrored-Strategy/run_ray.sh, in a folder of its
# own as the benchmark's packages are; the environment's packages keep their
# versions (the constraints), so Ray cannot shadow TensorFlow's.
ray: $(VENV)/ray-packages/.installed

$(VENV)/ray-packages/.installed: $(VENV)/.installed \
		Multi-Worker-Mirrored-Strategy/requirements-ray.txt
	$(PY) -m pip freeze --exclude-editable > $(VENV)/ray-constraints.txt
	$(PY) -m pip install --quiet --upgrade --target $(VENV)/ray-packages \
		-c $(VENV)/ray-constraints.txt \
		-r Multi-Worker-Mirrored-Strategy/requirements-ray.txt
	touch $@

# Not part of `make test`, to keep it under five minutes: three examples
# learning the real MNIST (skipped where its files are not beside the clone).
test-real-data: $(VENV)/.installed tools
	$(PY) -m pytest -p no:cacheprovider -n 3 tests/real_data

# Not part of `make test` (about a minute and a half): tasks lost while
# another waits for them, and a wait that gives up after its 20 s bound.
test-waits: venv tools
	$(PY) -m pytest -p no:cacheprovider -n 3 tests/waits

# Not part of `make test` (about six minutes): every example that trains in a
# MonitoredSession gets each error that makes TensorFlow recreate a session,
# and a duplicate request, injected into its chief mid-run, and must complete,
# its log naming the error; also the chief's final wait, and endless errors.
test-sessions: venv tools
	$(PY) -m pytest -p no:cacheprovider -n 3 tests/sessions

# Not part of `make test` (about three minutes): every example through its
# run.sh with each task a new Python, as a user's run starts it; `make test`
# forks its tasks from a process that imported TensorFlow once.
test-users-path: venv tools
	$(PY) -m pytest -p no:cacheprovider -n 3 tests/users_path

# Not part of `make test`: a Ray cluster of two nodes, one in a network
# namespace of its own (needs root).
test-ray: ray tools
	PYTHONPATH=$(VENV)/ray-packages $(PY) -m pytest -p no:cacheprovider tests/ray

clean:
	rm -rf $(VENV) */runs runs benchmarks/results/quick
	find benchmarks/results -depth -type d \( -name runs -o -name logs \) \
		-not -path '*/repeat/logs' -exec rm -rf {} +
