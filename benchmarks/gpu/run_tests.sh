#!/usr/bin/env bash
# On the device machine, after the stage's install.sh, from the repository root: convert SmolLM2 (once), then run
# the GPU tests of each engine with its own site directory, one engine after the other (the memory-release test
# reads device-wide free memory, so the engines must not share the GPU at the same time). Logs go to $OUT.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
export VERL_CACHE_DIR=/tmp/verl_cache PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
common=/tmp/site-common:/tmp/site-model:$PWD
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
for engine in vllm sglang; do
  PYTHONPATH=/tmp/site-$engine:$common python3 -c "
import importlib, torch, transformers, pyarrow
print('$engine site: torch', torch.__version__, 'transformers', transformers.__version__, 'pyarrow', pyarrow.__version__,
      '$engine', importlib.import_module('$engine').__version__)" 2>&1 | tail -1
done
PYTHONPATH=$common python3 -c "from verl.utils.default_model import default_model_path; print(default_model_path())" \
  2>&1 | tail -1
tests=(tests/workers/rollout/test_engines_gpu.py tests/workers/rollout/test_tensor_parallel_gpu.py)
for engine in vllm sglang; do
  extra=()
  true
  start=$(date +%s)
  PYTHONPATH=/tmp/site-$engine:$common timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q -s -m gpu \
    -p no:cacheprovider "${tests[@]}" "${extra[@]}" > "$out/tests-$engine.log" 2>&1
  rc=$?
  echo "== $engine tests: exit $rc after $(( $(date +%s) - start )) s"
  grep -E "timing_s|rollout_log_probs|released|parted|FSDP2|passed|failed|skipped|Error|error" "$out/tests-$engine.log" \
    | grep -v -i "warning" | tail -25
done
