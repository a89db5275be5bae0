"""``reward_model.launch_reward_fn_async``: step time with the reward function inline vs overlapped.

Runs ``python -m verl.trainer.main_ppo`` twice on the same tiny GRPO setup (HF rollout, KL loss so a reference
pass runs too) with a custom reward function that waits ``--seconds-per-sample`` per response (a remote verifier
or judge), once inline and once launched asynchronously. The asynchronous reward runs while the old and reference
log-probs are computed, so a step can save up to the shorter of the two. Prints the mean time of each phase over
steps 2.. of each run, the ratio of step times async / inline, and how long each step waits for its rewards (the
``reward`` phase plus ``adv``, where the asynchronous result is collected).

Usage: ``python -m benchmarks.bench_reward_async [--steps 4] [--seconds-per-sample 0.1]``.
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

SLOW_REWARD = """
import time

def compute_score(data_source, solution_str, ground_truth, extra_info=None, seconds=0.1):
    time.sleep(seconds)
    return float(len(solution_str) % 7) / 7
"""


def _run(workdir: Path, model: str, steps: int, seconds: float, asynchronous: bool) -> list[dict]:
    reward_file = workdir / "slow_reward.py"
    reward_file.write_text(SLOW_REWARD)
    metrics_file = workdir / "metrics.jsonl"
    overrides = [
        f"actor_rollout_ref.model.path={model}",
        "algorithm.adv_estimator=grpo",
        "data.train_batch_size=4",
        "data.max_prompt_length=96",
        "data.max_response_length=16",
        "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.rollout.name=hf",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.model.use_remove_padding=True",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "trainer.n_gpus_per_node=1",
        f"trainer.total_training_steps={steps}",
        "trainer.logger=[file]",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.resume_mode=disable",
        f"trainer.default_local_dir={workdir / 'checkpoints'}",
        f"custom_reward_function.path={reward_file}",
        f"+custom_reward_function.reward_kwargs.seconds={seconds}",
        f"reward_model.launch_reward_fn_async={asynchronous}",
    ]
    env = dict(os.environ, VERL_FILE_LOGGER_PATH=str(metrics_file), VLLM_ENABLE_V1_MULTIPROCESSING="0")
    env["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    proc = subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", *overrides],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"main_ppo failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return [json.loads(line)["data"] for line in metrics_file.read_text().splitlines() if line.strip()]


PHASES = ("step", "gen", "reward", "old_log_prob", "ref", "adv", "update_actor")
"""Timed phases printed per run (``adv`` includes collecting the asynchronous reward)."""


def _mean(records: list[dict], key: str) -> float:
    return statistics.mean(record.get(key, 0.0) for record in records[1:])  # step 1 includes warm-up


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--seconds-per-sample", type=float, default=0.1)
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    from tests.support.models import tiny_model_path

    model = tiny_model_path("llama")
    results = {}
    for label, asynchronous in (("inline", False), ("async", True)):
        with tempfile.TemporaryDirectory() as workdir:
            records = _run(Path(workdir), model, args.steps, args.seconds_per_sample, asynchronous)
        phases = {name: _mean(records, f"timing_s/{name}") for name in PHASES}
        results[label] = phases["step"]
        results[f"{label}_waiting"] = phases["reward"] + phases["adv"]
        print(f"{label:>6}: " + " | ".join(f"{name} {seconds:.2f} s" for name, seconds in phases.items()))
    results["ratio"] = results["async"] / results["inline"]
    print(
        f"step time async / inline: {results['ratio']:.2f}; the step waits for rewards (reward + adv phases) "
        f"{results['inline_waiting']:.2f} s inline, {results['async_waiting']:.2f} s async "
        f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}: compare waits, the step time follows the load)"
    )
    return results


if __name__ == "__main__":
    main()
