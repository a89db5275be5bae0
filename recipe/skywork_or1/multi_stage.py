"""Multi-stage training as Skywork-OR1 does it (He et al., 2025, arXiv:2505.22312, sec. 3.1): a run in stages of
growing ``max_response_length``, each with its own number of steps, each resuming from the checkpoint the previous
stage saved at its last step. One command runs them all::

    python -m recipe.skywork_or1.multi_stage --stages recipe/skywork_or1/config/stages_smollm2_arithmetic.yaml \\
        [key=value ...]

The stage file (``MultiStageConfig``)::

    entry: verl.trainer.main_ppo          # or a recipe's main module
    stages:
      - {name: short, max_response_length: 16, steps: 10}
      - {name: long,  max_response_length: 32, steps: 10, overrides: [actor_rollout_ref.actor.optim.lr=5e-6]}

Every stage runs ``python -m <entry> <common overrides> <stage overrides> data.max_response_length=<L>
trainer.total_training_steps=<steps so far> trainer.resume_mode=auto`` (and ``trainer.save_freq=<stage steps>``
when saving is off), so global steps, optimizer, data position and the adaptive entropy coefficient carry over.
All stage configs are composed and validated before the first stage starts; a stage whose last step is already
checkpointed is skipped, so the same command continues an interrupted run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from recipe.entry_points import MAIN_PPO, compose_entry
from verl.workers.config.base import BaseConfig, bounded_field

__all__ = ["MultiStageConfig", "StageConfig", "completed_step", "plan_stages", "run_stages"]


@dataclass
class StageConfig(BaseConfig):
    """One stage of the run."""

    max_response_length: int = bounded_field(1024, gt=0)
    """``data.max_response_length`` of this stage."""

    steps: int = bounded_field(1, gt=0)
    """Training steps of this stage."""

    name: str | None = None
    """Label in the logs; null: ``stage<i>``."""

    overrides: list[str] = field(default_factory=list)
    """Extra ``key=value`` overrides of this stage only."""


@dataclass
class MultiStageConfig(BaseConfig):
    """The stage file."""

    entry: str = MAIN_PPO
    """Module every stage runs with ``python -m`` (``verl.trainer.main_ppo`` or a recipe's main module)."""

    stages: list[StageConfig] = field(default_factory=list)
    """The stages, in order."""


def load_stages(path: str) -> MultiStageConfig:
    """Read and check the stage file."""
    from verl.trainer.config.validation import ConfigError, check_typed

    raw = yaml.safe_load(Path(path).read_text()) or {}
    stages = raw.get("stages") if isinstance(raw, dict) else None
    if not isinstance(stages, list) or not stages:
        raise ConfigError([f"{path}: 'stages' must be a non-empty list of stages"])
    typed = [check_typed(stage, StageConfig, prefix=f"stages[{i}]") for i, stage in enumerate(stages)]
    return MultiStageConfig(entry=raw.get("entry", MAIN_PPO), stages=typed)


def plan_stages(config: MultiStageConfig, common: list[str], save_freq: int) -> list[tuple[str, int, list[str]]]:
    """``(label, last global step, overrides)`` of every stage. Response lengths must not shrink."""
    from verl.trainer.config.validation import ConfigError

    plan, last_step, previous_length = [], 0, 0
    for index, stage in enumerate(config.stages):
        if stage.max_response_length < previous_length:
            raise ConfigError(
                [
                    f"stages[{index}].max_response_length={stage.max_response_length} is shorter than the previous "
                    f"stage's {previous_length}; Skywork-OR1's stages only grow the context"
                ]
            )
        previous_length = stage.max_response_length
        last_step += stage.steps
        overrides = [
            *common,
            *stage.overrides,
            f"data.max_response_length={stage.max_response_length}",
            f"trainer.total_training_steps={last_step}",
            "trainer.resume_mode=auto",
        ]
        if save_freq <= 0:
            overrides.append(f"trainer.save_freq={stage.steps}")
        plan.append((stage.name or f"stage{index}", last_step, overrides))
    return plan


def completed_step(checkpoint_root: str) -> int:
    """The global step of the latest checkpoint under ``checkpoint_root`` (0 when none)."""
    from verl.trainer.ppo.checkpointing import CHECKPOINT_TRACKER

    tracker = Path(checkpoint_root) / CHECKPOINT_TRACKER
    return int(tracker.read_text().strip()) if tracker.exists() else 0


def run_stages(config: MultiStageConfig, common: list[str]) -> None:
    """Validate every stage, then run the ones not done yet, each in its own process."""
    first = compose_entry(config.entry, common)
    plan = plan_stages(config, common, int(first.trainer.save_freq))
    checkpoint_roots = {
        os.path.abspath(compose_entry(config.entry, overrides).trainer.default_local_dir) for *_, overrides in plan
    }
    if len(checkpoint_roots) != 1:
        raise ValueError(
            f"the stages save to different folders {sorted(checkpoint_roots)}: keep trainer.default_local_dir, "
            "project_name and experiment_name equal across stages so each stage resumes the previous one"
        )
    (root,) = checkpoint_roots
    for label, last_step, overrides in plan:
        done = completed_step(root)
        if done >= last_step:
            print(
                f"[multi-stage] {label}: already done (checkpoint at step {done} >= {last_step}); skipped", flush=True
            )
            continue
        print(f"[multi-stage] {label}: steps {done + 1}..{last_step}, resuming from {root}", flush=True)
        result = subprocess.run([sys.executable, "-m", config.entry, *overrides], check=False)
        if result.returncode != 0:
            raise SystemExit(f"[multi-stage] {label} failed (exit code {result.returncode}); rerun to resume")
        if completed_step(root) < last_step:
            raise SystemExit(f"[multi-stage] {label} ended without a checkpoint at step {last_step} under {root}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Skywork-OR1 multi-stage training (see the module docstring).")
    parser.add_argument("--stages", required=True, help="YAML stage file (MultiStageConfig)")
    args, common = parser.parse_known_args()
    from verl.trainer.config.validation import ConfigError

    try:
        run_stages(load_stages(args.stages), common)
    except ConfigError as exc:
        print(f"{exc}\nNothing was started.", file=sys.stderr, flush=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
