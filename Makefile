# Quick start: `make demo` and `make test`. Both build .venv from requirements.txt when it is
# missing or when requirements.txt changed since it was built (a stamp holds its checksum).
PYTHON_BOOT ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements.sha256
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONPATH := $(CURDIR)

.PHONY: venv demo test bench bazel-test clean

venv:
	@want=$$(sha256sum requirements.txt | cut -d' ' -f1); \
	have=$$(cat $(STAMP) 2>/dev/null); \
	if [ ! -x $(PY) ] || [ "$$want" != "$$have" ]; then \
	  echo "[make] setting up $(VENV) from requirements.txt"; \
	  [ -x $(PY) ] || $(PYTHON_BOOT) -m venv $(VENV); \
	  $(PY) -m pip install -q --upgrade pip && \
	  $(PY) -m pip install -q -r requirements.txt && echo "$$want" > $(STAMP); \
	fi

demo: venv
	$(PY) -m examples.demo.demo $(DEMO_ARGS)

# The suite in parallel (pytest-xdist): TEST_WORKERS processes, test files
# handed out whole as workers free up, files with tests marked `slow` first
# (tests/conftest.py), so a module fixture runs once; each worker has its own
# tmp directory.
TEST_WORKERS ?= auto
test: venv
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests $(PYTEST_ARGS)

bench: venv
	$(PY) benchmarks/run_all.py

bazel-test: venv
	bash tools/bazel_test.sh $(BAZEL_TARGETS)

clean:
	rm -rf demo_output bazel-* .pytest_cache
