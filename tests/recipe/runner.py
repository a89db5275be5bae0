"""Running a recipe's CPU script as a user would (``bash recipe/<name>/run_*.sh <overrides>``) for the end-to-end
recipe tests, and reading its command line back for the composition tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.trainer.main_ppo_runner import main_ppo_env, read_records, short_ray_tmpdir

REPO_ROOT = Path(__file__).resolve().parents[2]
RECIPES = REPO_ROOT / "recipe"

CI_OVERRIDES = [
    "data.train_batch_size=4",
    "data.max_prompt_length=96",
    "data.max_response_length=16",
    "data.train_max_samples=64",
    "data.val_max_samples=4",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.02",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.actor.use_dynamic_bsz=False",
    "actor_rollout_ref.actor.optim.lr=1e-4",
    "trainer.total_training_steps=2",
    "trainer.test_freq=2",
    "trainer.val_before_train=False",
    "trainer.resume_mode=disable",
]
"""CI-sized settings appended to a recipe script's own (4 prompts, 16 response tokens, 2 steps)."""


def expanded_command(script: Path, env: dict[str, str] | None = None) -> list[str]:
    """The arguments of the script's ``python3`` command as bash expands them (variables, the override arrays of the
    sourced ``recipe/*.sh`` files), run from the repository root: ``python3`` is a shell function that prints them."""
    print_args = 'python3() { printf "%s\\0" "$@"; exit 0; }; source "$0"'
    proc = subprocess.run(
        ["bash", "-c", print_args, str(script)],
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.split("\0")[:-1]


def script_command(script: Path, env: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """``(module, overrides)`` of the ``python3 -m <module> ...`` command of a recipe script, expanded by bash."""
    args = expanded_command(script, env)
    if args[:1] != ["-m"]:
        raise ValueError(f"{script} does not end in a `python3 -m <module> ...` command (got {args[:2]})")
    return args[1], args[2:]


def run_script(script: Path, overrides: list[str], workdir: Path, extra_env: dict | None = None, timeout: float = 900):
    """Run the script with ``overrides`` appended; returns the process and the file logger's records."""
    metrics_file = workdir / "metrics.jsonl"
    env = main_ppo_env(metrics_file, short_ray_tmpdir())
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra_env or {})
    proc = subprocess.run(
        ["bash", str(script), *overrides], cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout
    )
    return proc, read_records(metrics_file)


def training_records(records: list[dict]) -> list[dict]:
    """The per-step records (validation-only records at step 0 left out)."""
    return [record for record in records if record["step"] > 0]
