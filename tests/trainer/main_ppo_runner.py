"""Running ``python -m verl.trainer.main_ppo`` as a user would, for the end-to-end trainer tests."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def tiny_overrides(model_path: str, workdir: Path, rollout: str, steps: int = 2) -> list[str]:
    """A cheap run: tiny model, 4 prompts x 2 samples, 16 response tokens, one worker process."""
    overrides = [
        f"actor_rollout_ref.model.path={model_path}",
        "data.train_batch_size=4",
        "data.max_prompt_length=96",
        "data.max_response_length=16",
        "data.train_max_samples=64",
        "data.val_max_samples=4",
        "actor_rollout_ref.rollout.n=2",
        f"actor_rollout_ref.rollout.name={rollout}",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.05",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.optim.lr=1e-4",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        f"trainer.total_training_steps={steps}",
        "trainer.logger=[console,file]",
        "trainer.val_before_train=True",
        f"trainer.test_freq={steps}",
        "trainer.save_freq=-1",
        "trainer.resume_mode=disable",
        f"trainer.default_local_dir={workdir / 'checkpoints'}",
    ]
    return overrides


def short_ray_tmpdir() -> str:
    """A short temp folder for Ray (its socket paths must stay under ~107 characters)."""
    return tempfile.mkdtemp(prefix="ray", dir="/tmp")


def main_ppo_env(metrics_file: Path, ray_tmpdir: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        VERL_FILE_LOGGER_PATH=str(metrics_file),
        RAY_TMPDIR=ray_tmpdir,
        VLLM_ENABLE_V1_MULTIPROCESSING="0",
        TOKENIZERS_PARALLELISM="false",
        RAY_DEDUP_LOGS="0",
        PYTHONUNBUFFERED="1",
    )
    return env


def main_ppo_command(overrides: list[str]) -> list[str]:
    return [sys.executable, "-m", "verl.trainer.main_ppo", *overrides]


def run_main_ppo(overrides: list[str], workdir: Path, timeout: float = 420) -> tuple[subprocess.CompletedProcess, list]:
    """Run to completion; returns the process and the file logger's records."""
    metrics_file = workdir / "metrics.jsonl"
    ray_tmpdir = short_ray_tmpdir()
    proc = subprocess.run(
        main_ppo_command(overrides),
        cwd=workdir,
        env=main_ppo_env(metrics_file, ray_tmpdir),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc, read_records(metrics_file)


def read_records(metrics_file: Path) -> list[dict]:
    if not metrics_file.exists():
        return []
    return [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]


def assert_finite(record: dict) -> None:
    bad = {k: v for k, v in record["data"].items() if isinstance(v, float) and not math.isfinite(v)}
    assert not bad, f"non-finite metrics at step {record['step']}: {bad}"


def describe(proc: subprocess.CompletedProcess) -> str:
    stdout, stderr = proc.stdout[-6000:], proc.stderr[-6000:]
    return f"exit code {proc.returncode}\n--- stdout (tail) ---\n{stdout}\n--- stderr (tail) ---\n{stderr}"
