# audee — common tasks.  `make install` builds .venv from pinned versions (requirements.txt).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# the second environment (`make env-prev`): the previous Keras minor beside .venv's frameworks
VENV_PREV ?= .venv-prev
RUN ?= runs/default
# each tool's fuzzing time in `make bench-nnsmith`
BENCH_SECONDS ?= 180
PYTEST_ARGS ?=
# test processes (pytest-xdist): each test file runs whole on one of them (module fixtures start their
# backend workers once).  Three on 2 cores: a test waits on its workers' answers, and two kept the
# cores 80 % busy, three 96 % (1208 s against 1416 s for the suite, s20)
TEST_JOBS ?= 3

.PHONY: install env-prev slurm fuzz test test-slow test-wheel bench bench-search bench-throughput bench-nnsmith localize-bench clean help

help:
	@echo "make install   build $(VENV) with the pinned stack and audee (editable)"
	@echo "make env-prev  build $(VENV_PREV): requirements-prev.txt (the previous Keras) over $(VENV)'s frameworks"
	@echo "make slurm     (root, Debian) install slurm-wlm and munge for the real-SLURM tests (CI runs it)"
	@echo "make fuzz      LeNet-5 across tensorflow, torch, jax, onnxruntime -> $(RUN)/"
	@echo "make test      run the test suite on the real frameworks"
	@echo "make test-slow   the slow sweeps (every API config, every seed) left out of make test"
	@echo "make test-wheel  build the wheel, install it into a fresh venv, run audee from outside the tree"
	@echo "make bench     overhead benchmark (experiments/bench_overhead.py)"
	@echo "make bench-search  GA overhead, GA vs random, NaN search (experiments/bench_search.py)"
	@echo "make bench-throughput  models per second against the bare-framework floor (experiments/bench_throughput.py)"
	@echo "make bench-nnsmith  test cases per second against NNSmith 0.1.0, installed privately (experiments/bench_vs_nnsmith.py)"
	@echo "make localize-bench  search + localization on the injected-fault corpus (localize/corpus.yaml)"

$(BIN)/python:
	$(PY) -m venv $(VENV)

install: $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	$(BIN)/audee backends --backends tensorflow,torch,jax,onnxruntime,openvino,litert,torch-onnx,torch-onnx-ts  # the modes run on these frameworks

# A second environment for version pairs (torch@prev, docs/backends.md "Environments"): a
# venv of its own holding only what requirements-prev.txt pins (no dependencies: the previous
# Keras), and a .pth line that puts $(VENV)'s site-packages after its own, so the same
# TensorFlow, torch and JAX are found there.  audee is not installed in it: its workers import
# audee from this checkout.  Seconds, one wheel: CI builds it beside `make install`.
env-prev: $(BIN)/python
	rm -rf $(VENV_PREV)
	$(BIN)/python -m venv --without-pip $(VENV_PREV)
	$(VENV_PREV)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > $(VENV_PREV)/.purelib
	$(BIN)/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > "$$(cat $(VENV_PREV)/.purelib)/audee-base.pth"
	$(BIN)/python -m pip install -q --no-deps --target "$$(cat $(VENV_PREV)/.purelib)" -r requirements-prev.txt
	rm -f $(VENV_PREV)/.purelib
	$(VENV_PREV)/bin/python -c "import importlib.metadata as m; print('$(VENV_PREV): keras', m.version('keras'))"

# The real-SLURM tests (tests/test_slurm.py) start a one-node cluster; they install nothing
# themselves.  Root only: a developer without root skips those tests (CI=true fails them).
slurm:
	@if [ "$$(id -u)" != 0 ]; then echo "make slurm: needs root (apt-get install slurm-wlm munge)" >&2; exit 1; fi
	@if command -v slurmctld >/dev/null && command -v munged >/dev/null; then echo "slurm-wlm and munge: installed"; \
	else DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	     DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge; fi

fuzz:
	$(BIN)/audee fuzz --seed lenet5 --backends tensorflow,torch,jax,onnxruntime --variants 50 --out $(RUN) --rng 0

# audee's bytecode, written once: where PYTHONDONTWRITEBYTECODE is set, each of the suite's
# hundreds of worker and command processes would compile audee again (about 0.6 s each on 2 cores)
test:
	$(BIN)/python -m compileall -q audee tests
	$(BIN)/python -m pytest -q --durations=15 -n $(TEST_JOBS) --dist loadfile $(PYTEST_ARGS)

test-slow:
	$(BIN)/python -m pytest -q -m slow $(PYTEST_ARGS)

test-wheel:
	$(BIN)/python -m pytest -q -m wheel tests/test_wheel.py

bench:
	$(BIN)/python experiments/bench_overhead.py

bench-search:
	$(BIN)/python experiments/bench_search.py

bench-throughput:
	$(BIN)/python experiments/bench_throughput.py

bench-nnsmith:
	$(BIN)/python experiments/bench_vs_nnsmith.py --seconds $(BENCH_SECONDS) --json experiments/results/bench_nnsmith.json --md experiments/results/bench_nnsmith.md

localize-bench:
	$(BIN)/python -m localize.scorer

clean:
	rm -rf $(RUN) .pytest_cache
