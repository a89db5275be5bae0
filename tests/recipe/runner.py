"""Running a recipe's CPU script as a user would (``bash recipe/<name>/run_*.sh <overrides>``) for the end-to-end
recipe tests, and reading its command line back for the composition tests."""

from __future__ import annotations

import os
import re
import shlex
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


def script_command(script: Path) -> tuple[str, list[str]]:
    """``(module, overrides)`` of the ``python3 -m <module> ...`` line of a recipe script (variables kept)."""
    text = script.read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if re.match(r"\s*python3? -m (recipe|verl)\.", line))
    tokens = shlex.split(line.split(" -m ", 1)[1])
    return tokens[0], [token for token in tokens[1:] if token not in ("$@", '"$@"')]


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
