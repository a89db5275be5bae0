#!/usr/bin/env bash
# One device call of the GRPO/update benchmarks, by preset name, so that the call's command line names no engine
# (benchmarks.gpu.leftovers kills every process whose command line names one after each job):
#
#   bash benchmarks/gpu/calls.sh PRESET [PRESET ...]     (repository root, after the stage's install.sh)
#
# Each preset runs as one `item` of benchmarks/gpu/call_env.sh (its log in $OUT/<preset>.log) and brings back
# $OUT/<preset>_results.jsonl, $OUT/<preset>_table.md and $OUT/<preset>.tgz (the run logs and metrics). START and
# CALL (seconds; default: now and 585) bound the whole call, as in call_env.sh: `S=$(date +%s); bash
# .stage-vs/N/install.sh > /tmp/install.log 2>&1; START=$S bash benchmarks/gpu/calls.sh warm` (N: the stage's last
# part) counts the install.
# Data: .carry/data (examples/data_preprocess/gsm8k.py --max_samples 320; see benchmarks/results/NOTES_gpu.md).
#
# Presets:
#   warm    every compile cache filled: one step of each engine's loop and each bare engine (cold: about 560 s)
#   table   issue 14's table: 6 steps of sglang, vllm and hf, and both bare engines (about 480 s warm), with the
#           monitors, so each loop is also set against its bare engine at the same host speed (session 26)
#   table14 `table` without the monitors and with hf first: issue 14's "done when" table in one call (session 33's
#           `table` took 468 s for its first four runs on a slow machine, and the call's limit cut hf, its last)
#   table14b `table14` with each bare engine run again right after its loop (standalone-ENGINE#2): the loop's
#           generation against its bare engine before and after it in time, and pooled (sessions 22-34: the bare
#           engine's level moved with the host's Python speed from minute to minute; about 600 s warm, so the last
#           run, vLLM's second bare one, may be cut)
#   table14w `table14b` without the NVML sampler: the memory column is then the workers' device use as each phase
#           ends (verl.workers.sharding_manager.memory.phase_end_memory; table14b prints it beside the sampler's
#           peaks, to check it against them)
#   table14x issue 14's table without either of the two things session 35 suspected of SGLang's 61-67% in
#           table14/table14b: no NVML sampler (the memory column is then the workers' device use as each phase ends) and
#           hf after the engines (session 36's call A: no sampler, the loop before hf, still 65%); SGLang's bare engine
#           again last, if the call has room (about 530 s warm: needs `warmbare` first on a fresh machine)
#   warmbare both bare engines once on a fresh machine: the model's conversion, SGLang's JIT kernels and vLLM's
#           compile cache, which otherwise cost a fresh machine's first table 150-200 s (session 36: the conversion 49 s,
#           SGLang's bare run 135 s, vLLM's cold compile still running when the call's 288 s ran out; give it 400)
#   bracket `table14b` without hf, vLLM first: both engines' loops bracketed by their bare engines (about 460 s warm;
#           on a fresh machine, after the install, about 560 s: SGLang's second bare run may be cut)
#   sampler14 does the NVML memory sampler (100 ms, as table14/table14b) slow SGLang's loop? Session 35: the loop at
#           67% of its bracketing bare runs with it (table14b), 87% without (keeploop). The loop with and without it,
#           alternating, and the bare engine with and without it (about 480 s warm)
#   hffirst does a run of `hf` before it slow SGLang's loop (table14 and table14b run hf first; both had the loop at
#           61-67% of its bare engine, keeploop without hf 87%)? The loop and its bare engine, hf, then both again;
#           no NVML sampler (about 440 s warm)
#   inproc  vLLM's bare engine in its own process layout and in one process (as the loop's), the loop, and TRL
#   freeze  SGLang's loop with and without the worker's heap freeze, its bare engine, and TRL
#   update  issue 15's 0.5B update with fused AdamW: the default (varlen) with a kernel profile, without the
#           backward re-gather (noreshard), and with padded_flash (about 240 s)
#   logprob issue 15's 0.5B update with the Triton log-prob head (the default since session 19, profiled), with the
#           compiled chunks it replaced, and without the backward re-gather; the head's own times (about 200 s; it
#           needs only the common set without Ray: .stage-cm/1/install.sh, see NOTES_gpu.md's session 19)
#   kernels the GPU tests of the Triton log-prob head and the packed attention kernels (about 60 s)
#   gaps15  issue 15's 0.5B update, the default path, 8 timed steps and one profiled: the kernel table and where the
#           device idles, each gap put down to the host op running then (benchmarks/gpu/device_gaps.py; about 150 s;
#           the common set without Ray is enough)
#   update15 issue 15's "done when" update benchmark: the default path on Qwen2.5-0.5B's and SmolLM2's shapes (about
#           200 s, the 0.5B's child 80-110 s; with `trl` after it, issue 15's whole GPU part in one call)
#   update15g update15 with reshard_after_forward=False (units kept gathered; nd tiling is the default since session
#           32): the one-GPU setting docs/fsdp_engine.md recommends, both shapes (about 200 s; the common set is enough)
#   keep15  issue 15's 0.5B update, the default against reshard_after_forward=False, which now keeps each unit gathered
#           from a mini-batch's first forward to its last backward (one gather a step, not four; session 31's profile:
#           35 ms of FSDP2 copies a step), and inductor's nd tiling (RoPE's compiled kernels: 28.5 ms a step against a
#           traffic floor near 7 ms; cut by session 20's limit, never measured), 8 timed steps each (about 270 s; the
#           common set without Ray)
#   keep15b keep15 in reverse order with both levers together first (session 32's keep15: noreshard 1.3%, ndtiling
#           2.2% faster than the default, which ran first; about 300 s)
#   keep15c the default against both levers, alternating A B A B (machine drift between variants was as large as
#           either lever in keep15 and keep15b; about 300 s)
#   keep15s the same levers on SmolLM2's shape (the loop's model; 30 layers of 2.3 ms of matmuls a micro-batch, so
#           per-unit gathers weigh more), A B C A B C (about 300 s)
#   keep15t keep15s with nd tiling alone in place of noreshard alone (about 300 s)
#   keep15u SmolLM2's update with units kept gathered, without and with nd tiling, A B A B (about 220 s)
#   rootonly issue 15's update on both shapes, the default against one FSDP2 unit (the root alone,
#           fsdp_config.wrap_policy.transformer_layer_cls_to_wrap=[]): per-layer units' hooks and gathers are host
#           work in a near host-bound step (about 320 s; the common set without Ray is enough)
#   rows15  issue 15's 0.5B update, the default (the output layer on every packed token on CUDA) against `+rows`
#           (on the response rows alone, the CPU's default since session 34), A B A B, 8 timed steps each (about
#           340 s; the common set without Ray is enough: .stage-cm/1/install.sh)
#   shapes  issue 15's 0.5B update (the default) against static-shape decoder layers (profiled: RoPE's kernels),
#           inductor's nd tiling and token-major RoPE (about 250 s; the common set without Ray is enough)
#   ratio   issue 14's SGLang ratio without NVML sampling: the bare engine before and after the loop, and TRL in the
#           same call (session 19: the loop's engine made 55k tok/s in the sampled table call, 67k in the unsampled
#           TRL call; about 420 s warm)
#   ratioctx the bare engine (12 generations), then SGLang's loop for 12 steps, both with the monitors: each
#           generation beside its engine thread's vCPUs and neighbours, steal, SM clock and power and the host's
#           speed (cpu_probe), as gapctx does for the isolated setups; the table then sets the loop against the bare
#           engine at the same host speed (about 350 s cold, 220 s warm)
#   trl     issue 15's ratio: SGLang's loop and TRL's GRPOTrainer in one call (about 220 s warm)
#   trlg    `trl` with the actor and the reference kept gathered (reshard_after_forward=False), as `gatherloop`'s
#           second run: issue 15's ratio with the one-GPU setting (about 220 s warm)
#   bare    vLLM's bare engine in its own process layout and in one process (inproc without the loop and TRL)
#   gap     issue 14's SGLang gap, the loop's parts one at a time (benchmarks/gpu/sglang_gap.py): the bare engine, the
#           rollout with its sharding manager in one process, the same inside a Ray worker holding the GPU; the loop's
#           0.15 memory fraction, five repeats each (about 300 s warm; the Ray variant never ran on a GPU before)
#   gapray  session 22's follow-up of `gap` (the rollout in a Ray worker made 0.68 of bare, in its own process 0.83):
#           the Ray worker at Ray's niceness 15 and at 0, the rollout alone, without the memory saver (keep), and
#           bare; results straight into $OUT (session 22: over 480 s on a fresh machine, bare not reached; the
#           per-generation spread made its five repeats too few to rank the setups)
#   gapctx  issue 14's per-generation decode level: the bare engine, the isolated rollout, the same with SGLang's
#           sleep_on_idle off (spin) and without the memory saver (keep): the rollout's two engine settings that the
#           bare engine lacks. Twelve generations each, every one beside its engine thread's vCPUs and busy
#           neighbours, host steal, SM clock and power (benchmarks/gpu/generation_context.py; about 400 s cold)
#   saver   session 23's follow-up of `gapctx` (`rollout-keep`, without SGLang's memory saver and the release/resume
#           around each generation, made 0.91 and 1.00 of bare on the same tokens; `rollout` 0.82 and 0.79): the saver
#           without releases (`rollout-keep-saver`), releasing only the KV cache (`rollout-relkv`) or only the weights
#           and CUDA graphs (`rollout-relrest`), beside `rollout` and `rollout-keep`; eight generations each (about
#           400 s on a fresh machine: its first variant compiles for about 90 s, session 23's cut it at 110 s)
#   blocks  session 24's follow-up of `saver` (on Firecracker `keep` was the slowest setup; the setups that keep their
#           memory mostly held one level a process, those that release changed it from one generation to the next):
#           `rollout-block` lets only every 4th release and resume reach the engine, beside `rollout` and
#           `rollout-keep`, sixteen generations each. If a real release redraws the level, `rollout-block`'s changes
#           fall at its blocks' edges (its results' `release_blocks`; about 250 s warm, 340 s on a fresh machine)
#   hostspeed session 25's follow-up of `blocks` (a real release does not set the level: it moved within blocks of four
#           and without releases; at the slow level the GPU's SM use fell, so the GPU waited for the host): the bare
#           engine, `rollout-keep` and `rollout`, sixteen generations each, with benchmarks.gpu.cpu_probe timing a
#           fixed Python workload on the host's vCPUs beside them; each run ends with the rank correlation of the
#           rate with the engine thread's cores, SM use and the probe's time (about 250 s warm)
#   gatherloop the loop (SGLang) by default and with reshard_after_forward=False for the actor and the reference
#           (session 32: the update 8-19% faster on SmolLM2's shape with nd tiling, now the default; about 300 s)
#   keeploop the loop with free_cache_engine=False (sglang@keep) beside the default loop and the bare engine, six steps
#           each (about 280 s warm)
#   caches  the sizes of the compile and model caches the other presets filled (torch inductor, Triton, vLLM, SGLang,
#           FlashInfer, the embedded model): what a later session could carry in instead of a cold warm-up (seconds)
#   packcaches  the compile caches SGLang's runs and the loop fill (torch inductor, Triton, FlashInfer, tvm-ffi; about
#           29 MB after `warm`, not vLLM's 73 MB nor the rebuilt model) into $OUT/caches.tgz.partNN, 15 MiB each (a
#           call brings back 8 files of at most 16 MiB). Here: `mkdir -p .carry/caches && cp <files_at>/caches.tgz.part*
#           .carry/caches/`; on a fresh machine, one call before the install (carry [".carry/caches"]):
#           `cat .carry/caches/caches.tgz.part* | tar -xzf - -C /` (session 23: a cold first engine spent 63 s
#           compiling for its first prefill CUDA graph; session 22: engine start 95 s cold, 35 s warm)
#   tp      issue 14's tensor-parallel test on 2 GPUs (nvidia-h200-x2 or -h100-x2): TP=2 greedy equals TP=1 greedy,
#           vLLM then SGLang, each engine from its own site (about 2 x 250 s; both passed on H200 x2 in session 27)
#   tpfirst, tpsecond  `tp`'s first engine (vLLM) or its second (SGLang) alone: one call each when the install and
#           both engines would not fit in one call
#   loop2   the loop on 2 GPUs (nvidia-h200-x2 or -h100-x2): the FSDP2 actor over both, SGLang and vLLM at TP=2
#           across the two workers (tp2), on a random-weight model with SmolLM2's shape but 8 / 2 heads (its 9 / 3 do
#           not split in two: session 28's first try failed there); the CPU suite runs vLLM's TP=2 loop in
#           tests/trainer/test_main_ppo.py. Each response of a random model runs to 256 tokens
#   loop2dp the same model on one GPU, then data parallel on both (one engine a GPU, dp2): the loop's scaling
#   loop2s  vLLM's loop at TP=2 as `loop2` runs it, then with VERL_RAY_SHARE_NODE_GPUS=1 (tp2s: each worker sees
#           both GPUs and picks its own, so NCCL may go peer to peer and vLLM keeps its custom all-reduce; session 29's
#           TP=2 vLLM generated at half SGLang's rate; about 440 s)
#   loop2s1 `loop2s`'s second run alone (vllm@tp2s; about 220 s)
#   loop2sg `loop2s` for SGLang: sglang@tp2 and sglang@tp2s (about 400 s)
#   nccl2   two GPUs, no engine: NCCL's transport and costs between two processes that each see their own GPU (as Ray
#           workers) or both (benchmarks.gpu.nccl_transport), then the weight sync's gather of FSDP2 shards, one
#           full_tensor a tensor against one collective a bucket (benchmarks.bench_weight_gather; about 120 s)
set -uo pipefail
# after each job call_env.sh's `item` kills every Ray, engine and main_ppo process of the machine: device only
nvidia-smi -L > /dev/null 2>&1 || { echo "calls.sh runs on a GPU device machine only" >&2; exit 2; }
source benchmarks/gpu/call_env.sh
[ "$#" -ge 1 ] || { echo "usage: calls.sh PRESET [PRESET ...]" >&2; exit 2; }
# the platform in the record: kernel 4.4.0 is gVisor, 6.x Firecracker (multi-GPU kinds; a one-GPU kind in session 31)
echo "== machine: kernel $(uname -r), $(nproc) vCPUs, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"

# SmolLM2's depth, width of MLP and vocabulary with 8 query / 2 KV heads (hidden 512): its 9 / 3 do not split at TP=2
EVEN_HEADS=hidden_size=512,num_attention_heads=8,num_key_value_heads=2

grpo() {  # grpo NAME LIMIT ARGS...: one bench_gpu_grpo item, its files brought back under NAME
  local name=$1 limit=$2
  shift 2
  rm -rf "/tmp/$name"  # the benchmark appends to its results.jsonl: a preset run twice on one machine starts clean
  item "$name" "$limit" python3 -m benchmarks.bench_gpu_grpo --out "/tmp/$name" --data .carry/data "$@"
  cp "/tmp/$name/results.jsonl" "$OUT/${name}_results.jsonl" 2>/dev/null
  cp "/tmp/$name/table.md" "$OUT/${name}_table.md" 2>/dev/null
  keep "/tmp/$name" "$name"
}

for preset in "$@"; do
  case $preset in
    warm) grpo warm 560 --memory-sample-ms 0 --timeout 220 --steps 1 \
      --runs standalone-sglang,sglang,standalone-vllm,vllm ;;
    table) grpo table 580 --memory-sample-ms 100 --timeout 200 --gpu-monitor \
      --runs standalone-sglang,sglang,standalone-vllm,vllm,hf ;;
    table14) grpo table14 590 --memory-sample-ms 100 --timeout 200 --runs hf,standalone-sglang,sglang,standalone-vllm,vllm ;;
    table14b) grpo table14b 590 --memory-sample-ms 100 --timeout 200 \
      --runs hf,standalone-sglang,sglang,standalone-sglang#2,standalone-vllm,vllm,standalone-vllm#2 ;;
    table14w) grpo table14w 590 --memory-sample-ms 0 --timeout 200 \
      --runs hf,standalone-sglang,sglang,standalone-sglang#2,standalone-vllm,vllm,standalone-vllm#2 ;;
    table14x) grpo table14x 590 --memory-sample-ms 0 --timeout 200 \
      --runs standalone-sglang,sglang,standalone-vllm,vllm,hf,standalone-sglang#2 ;;
    warmbare) grpo warmbare 400 --memory-sample-ms 0 --timeout 250 --runs standalone-sglang,standalone-vllm ;;
    bracket) grpo bracket 590 --memory-sample-ms 100 --timeout 200 \
      --runs standalone-vllm,vllm,standalone-vllm#2,standalone-sglang,sglang,standalone-sglang#2 ;;
    sampler14) grpo sampler14 590 --memory-sample-ms 100 --timeout 150 --variant nosample= \
      --runs standalone-sglang,sglang,sglang@nosample,standalone-sglang@nosample,sglang#2,sglang@nosample#2 ;;
    hffirst) grpo hffirst 590 --memory-sample-ms 0 --timeout 200 \
      --runs standalone-sglang,sglang,hf,sglang#2,standalone-sglang#2 ;;
    inproc) grpo inproc 580 --memory-sample-ms 0 --timeout 200 \
      --variant inproc=env:VLLM_ENABLE_V1_MULTIPROCESSING=0 --runs standalone-vllm,standalone-vllm@inproc,vllm,trl ;;
    freeze) grpo freeze 580 --memory-sample-ms 0 --timeout 200 \
      --variant nofreeze=env:VERL_GC_FREEZE=0 --runs standalone-sglang,sglang,trl,sglang@nofreeze ;;
    update) PYTHONPATH=$VL item update 300 python3 -m benchmarks.bench_gpu_update --shapes qwen2.5-0.5b \
      --variants varlen+logits+compile+fusedadam+profile varlen+logits+compile+fusedadam+noreshard \
      varlen+logits+compile+fusedadam+flash --budget 170 --timeout 150 --out "$OUT" ;;
    logprob) PYTHONPATH=$VL item logprob 280 python3 -m benchmarks.bench_gpu_update --shapes qwen2.5-0.5b \
      --variants varlen+logits+compile+fusedadam+profile varlen+logits+compile+fusedadam+tlcompile \
      varlen+logits+compile+fusedadam+noreshard --budget 200 --timeout 120 --out "$OUT" ;;
    kernels) PYTHONPATH=$VL item kernels 120 python3 -m pytest -m gpu -q -p no:cacheprovider \
      tests/utils/test_triton_logprobs.py tests/workers/engine/fsdp/test_attention.py ;;
    update15) PYTHONPATH=$VL item update15 360 python3 -m benchmarks.bench_gpu_update --shapes qwen2.5-0.5b \
      smollm2-135m --variants varlen+logits+compile+fusedadam --budget 200 --timeout 150 --out "$OUT" ;;
    update15g) PYTHONPATH=$VL item update15g 360 python3 -m benchmarks.bench_gpu_update --shapes qwen2.5-0.5b \
      smollm2-135m --variants varlen+logits+compile+fusedadam+noreshard --budget 200 --timeout 150 --out "$OUT" ;;
    gaps15) PYTHONPATH=$VL item gaps15 240 python3 -m benchmarks.bench_gpu_update --shapes qwen2.5-0.5b \
      --variants varlen+logits+compile+fusedadam+profile --steps 8 --budget 120 --timeout 200 --out "$OUT" ;;
    keep15) PYTHONPATH=$VL item keep15 400 python3 -m benchmarks.bench_gpu_update --shapes qwen2.5-0.5b \
      --variants varlen+logits+compile+fusedadam varlen+logits+compile+fusedadam+noreshard \
      varlen+logits+compile+fusedadam+ndtiling --steps 8 --budget 260 --timeout 130 --out "$OUT" ;;
    keep15b) PYTHONPATH=$VL item keep15b 420 python3 -m benchmarks.bench_gpu_update --shapes qwen2.5-0.5b \
      --variants varlen+logits+compile+fusedadam+noreshard+ndtiling varlen+logits+compile+fusedadam+ndtiling \
      varlen+logits+compile+fusedadam varlen+logits+compile+fusedadam+noreshard --steps 8 --budget 330 \
      --timeout 130 --out "$OUT" ;;
    keep15c) PYTHONPATH=$VL item keep15c 420 python3 -m benchmarks.bench_gpu_update --shapes qwen2.5-0.5b \
      --variants varlen+logits+compile+fusedadam varlen+logits+compile+fusedadam+noreshard+ndtiling \
      varlen+logits+compile+fusedadam varlen+logits+compile+fusedadam+noreshard+ndtiling --steps 8 --budget 330 \
      --timeout 130 --out "$OUT" ;;
    keep15s) PYTHONPATH=$VL item keep15s 420 python3 -m benchmarks.bench_gpu_update --shapes smollm2-135m \
      --variants varlen+logits+compile+fusedadam varlen+logits+compile+fusedadam+noreshard \
      varlen+logits+compile+fusedadam+noreshard+ndtiling varlen+logits+compile+fusedadam \
      varlen+logits+compile+fusedadam+noreshard varlen+logits+compile+fusedadam+noreshard+ndtiling --steps 8 \
      --budget 330 --timeout 120 --out "$OUT" ;;
    keep15t) PYTHONPATH=$VL item keep15t 420 python3 -m benchmarks.bench_gpu_update --shapes smollm2-135m \
      --variants varlen+logits+compile+fusedadam varlen+logits+compile+fusedadam+ndtiling \
      varlen+logits+compile+fusedadam+noreshard+ndtiling varlen+logits+compile+fusedadam \
      varlen+logits+compile+fusedadam+ndtiling varlen+logits+compile+fusedadam+noreshard+ndtiling --steps 8 \
      --budget 330 --timeout 120 --out "$OUT" ;;
    keep15u) PYTHONPATH=$VL item keep15u 330 python3 -m benchmarks.bench_gpu_update --shapes smollm2-135m \
      --variants varlen+logits+compile+fusedadam+noreshard varlen+logits+compile+fusedadam+noreshard+ndtiling \
      varlen+logits+compile+fusedadam+noreshard varlen+logits+compile+fusedadam+noreshard+ndtiling --steps 8 \
      --budget 240 --timeout 110 --out "$OUT" ;;
    rows15) PYTHONPATH=$VL item rows15 420 python3 -m benchmarks.bench_gpu_update --shapes qwen2.5-0.5b \
      --variants varlen+logits+compile+fusedadam varlen+logits+compile+fusedadam+rows \
      varlen+logits+compile+fusedadam varlen+logits+compile+fusedadam+rows --steps 8 --budget 360 \
      --timeout 130 --out "$OUT" ;;
    rootonly) PYTHONPATH=$VL item rootonly 400 python3 -m benchmarks.bench_gpu_update --shapes qwen2.5-0.5b \
      smollm2-135m --variants varlen+logits+compile+fusedadam varlen+logits+compile+fusedadam+rootonly \
      --budget 360 --timeout 100 --out "$OUT" ;;
    shapes) PYTHONPATH=$VL item shapes 280 python3 -m benchmarks.bench_gpu_update --shapes qwen2.5-0.5b \
      --variants varlen+logits+compile+fusedadam varlen+logits+compile+fusedadam+ropetokens \
      varlen+logits+compile+fusedadam+static varlen+logits+compile+fusedadam+ndtiling \
      --budget 220 --timeout 120 --out "$OUT" ;;
    ratio) grpo ratio 580 --memory-sample-ms 0 --timeout 200 --variant again= \
      --runs standalone-sglang,sglang,standalone-sglang@again,trl ;;
    ratioctx) grpo ratioctx 580 --memory-sample-ms 0 --timeout 240 --steps 12 --standalone-repeats 12 \
      --gpu-monitor --runs standalone-sglang,sglang ;;
    trl) grpo trl 400 --memory-sample-ms 0 --timeout 200 --runs sglang,trl ;;
    trlg) grpo trlg 400 --memory-sample-ms 0 --timeout 200 --runs sglang@gathered,trl \
      --variant gathered=actor_rollout_ref.actor.fsdp_config.reshard_after_forward=False,actor_rollout_ref.ref.fsdp_config.reshard_after_forward=False ;;
    bare) grpo bare 300 --memory-sample-ms 0 --timeout 150 \
      --variant inproc=env:VLLM_ENABLE_V1_MULTIPROCESSING=0 --runs standalone-vllm,standalone-vllm@inproc ;;
    gap) PYTHONPATH=$SG item gap 400 python3 -m benchmarks.gpu.sglang_gap --data .carry/data/train.parquet \
      --out /tmp/gap --variants bare,rollout,rollout-ray --gpu-memory-utilization 0.15 --repeats 5 --timeout 130
      keep /tmp/gap gap ;;
    gapray) PYTHONPATH=$SG item gapray 480 python3 -m benchmarks.gpu.sglang_gap --data .carry/data/train.parquet \
      --out "$OUT/gapray" --variants rollout-ray,rollout-ray-nice0,rollout,rollout-keep,bare \
      --gpu-memory-utilization 0.15 --repeats 5 --timeout 200 ;;
    gapctx) PYTHONPATH=$SG item gapctx 480 python3 -m benchmarks.gpu.sglang_gap --data .carry/data/train.parquet \
      --out /tmp/gapctx --variants bare,rollout,rollout-spin,rollout-keep --gpu-memory-utilization 0.15 --repeats 12 \
      --timeout 150
      keep /tmp/gapctx gapctx ;;
    saver) PYTHONPATH=$SG item saver 520 python3 -m benchmarks.gpu.sglang_gap --data .carry/data/train.parquet \
      --out /tmp/saver --variants rollout-keep-saver,rollout-relkv,rollout-relrest,rollout,rollout-keep \
      --gpu-memory-utilization 0.15 --repeats 8 --timeout 200
      keep /tmp/saver saver ;;
    blocks) PYTHONPATH=$SG item blocks 400 python3 -m benchmarks.gpu.sglang_gap --data .carry/data/train.parquet \
      --out /tmp/blocks --variants rollout-block,rollout,rollout-keep --block 4 --gpu-memory-utilization 0.15 \
      --repeats 16 --timeout 200
      keep /tmp/blocks blocks ;;
    hostspeed) PYTHONPATH=$SG item hostspeed 400 python3 -m benchmarks.gpu.sglang_gap --data .carry/data/train.parquet \
      --out /tmp/hostspeed --variants bare,rollout-keep,rollout --gpu-memory-utilization 0.15 --repeats 16 --timeout 200
      keep /tmp/hostspeed hostspeed ;;
    rootloop) grpo rootloop 330 --memory-sample-ms 0 --timeout 150 --runs sglang,sglang@rootonly \
      --variant rootonly=actor_rollout_ref.actor.fsdp_config.wrap_policy.transformer_layer_cls_to_wrap=[] ;;
    loop2) grpo loop2 580 --memory-sample-ms 0 --timeout 230 --random-model "$EVEN_HEADS" --runs sglang@tp2,vllm@tp2 \
      --variant tp2=trainer.n_gpus_per_node=2,actor_rollout_ref.rollout.tensor_model_parallel_size=2 ;;
    loop2dp) grpo loop2dp 580 --memory-sample-ms 0 --timeout 230 --random-model "$EVEN_HEADS" --runs sglang,sglang@dp2 \
      --variant dp2=trainer.n_gpus_per_node=2 ;;
    loop2s) grpo loop2s 580 --memory-sample-ms 0 --timeout 230 --random-model "$EVEN_HEADS" --runs vllm@tp2,vllm@tp2s \
      --variant tp2=trainer.n_gpus_per_node=2,actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
      --variant tp2s=trainer.n_gpus_per_node=2,actor_rollout_ref.rollout.tensor_model_parallel_size=2,env:VERL_RAY_SHARE_NODE_GPUS=1 ;;
    loop2s1) grpo loop2s1 400 --memory-sample-ms 0 --timeout 230 --random-model "$EVEN_HEADS" --runs vllm@tp2s \
      --variant tp2s=trainer.n_gpus_per_node=2,actor_rollout_ref.rollout.tensor_model_parallel_size=2,env:VERL_RAY_SHARE_NODE_GPUS=1 ;;
    loop2sg) grpo loop2sg 580 --memory-sample-ms 0 --timeout 230 --random-model "$EVEN_HEADS" \
      --runs sglang@tp2,sglang@tp2s \
      --variant tp2=trainer.n_gpus_per_node=2,actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
      --variant tp2s=trainer.n_gpus_per_node=2,actor_rollout_ref.rollout.tensor_model_parallel_size=2,env:VERL_RAY_SHARE_NODE_GPUS=1 ;;
    nccl2) item nccl_transport 200 python3 -m benchmarks.gpu.nccl_transport
      PYTHONPATH=$VL item gather2 200 python3 -m benchmarks.bench_weight_gather --repeats 5 ;;
    gatherloop) grpo gatherloop 330 --memory-sample-ms 0 --timeout 150 --runs sglang,sglang@gathered \
      --variant gathered=actor_rollout_ref.actor.fsdp_config.reshard_after_forward=False,actor_rollout_ref.ref.fsdp_config.reshard_after_forward=False ;;
    keeploop) grpo keeploop 400 --memory-sample-ms 0 --timeout 150 --runs standalone-sglang,sglang,sglang@keep \
      --variant keep=actor_rollout_ref.rollout.free_cache_engine=False ;;
    caches) for dir in /tmp/torchinductor_* ~/.triton ~/.cache/* /tmp/verl_cache/*; do
        [ -e "$dir" ] && du -sh "$dir" 2>/dev/null
      done
      du -sh ~/.cache /tmp/verl_cache 2>/dev/null ;;
    packcaches) dirs=()
      for dir in /tmp/torchinductor_"$(id -un)" "$HOME/.triton" "$HOME/.cache/flashinfer" "$HOME/.cache/tvm-ffi"; do
        [ -e "$dir" ] && dirs+=("${dir#/}")
      done
      du -sh "${dirs[@]/#//}"
      tar -czf /tmp/caches.tgz -C / "${dirs[@]}"
      room=$((8 - $(find "$OUT" -type f | wc -l)))  # a call brings back 8 files
      if [ "$(stat -c %s /tmp/caches.tgz)" -le $((room * 15 * 1024 * 1024)) ]; then
        split -b 15m -d /tmp/caches.tgz "$OUT/caches.tgz.part" && ls -l "$OUT"/caches.tgz.part*
      else
        echo "packcaches: $(du -h /tmp/caches.tgz | cut -f1) packed; room for $room parts of 15 MiB: not brought back"
      fi
      rm -f /tmp/caches.tgz ;;
    tp|tpfirst|tpsecond) engines="vllm sglang"
      [ "$preset" = tpfirst ] && engines=vllm
      [ "$preset" = tpsecond ] && engines=sglang
      for engine in $engines; do
        site=$VL; [ "$engine" = sglang ] && site=$SG
        limit=290; [ "$preset" = tp ] || limit=560
        PYTHONPATH=$site item "tp_$engine" $limit python3 -m pytest -m gpu -q -s -p no:cacheprovider \
          tests/workers/rollout/test_tensor_parallel_gpu.py -k "$engine"
      done ;;
    *) echo "unknown preset $preset (see the head of $0)" >&2 ;;
  esac
done
echo "calls.sh: $(($(date +%s) - START)) s"
