"""Entry point of the SPIN recipe::

    python -m recipe.spin.main_spin [key=value ...]

Composes ``recipe/spin/config/spin_trainer.yaml`` (the PPO tree plus ``algorithm.dpo_*``,
``trainer.ref_update_freq`` and ``data.response_key``), validates it before Ray starts, and runs
:class:`~recipe.spin.spin_trainer.SpinTrainer` with one actor/rollout/reference worker group.
"""

from __future__ import annotations

from pathlib import Path

import hydra

from recipe.spin.config import SpinConfig
from verl.trainer.main_ppo import TaskRunner, cli, run_or_exit

CONFIG_FILE = Path(__file__).parent / "config" / "spin_trainer.yaml"
"""The recipe's root config (composed on top of ``ppo_trainer.yaml``)."""
SCHEMA = SpinConfig
"""Its typed tree."""


class SpinTaskRunner(TaskRunner):
    trainer_class = "recipe.spin.spin_trainer:SpinTrainer"

    @staticmethod
    def _role_worker_mapping(config, use_critic: bool, use_reference_policy: bool) -> dict:
        from recipe.spin.fsdp_workers import SPINWorker
        from verl.trainer.ppo.utils import Role

        return {Role.ActorRolloutRef: SPINWorker}


@hydra.main(config_path="config", config_name=CONFIG_FILE.stem, version_base=None)
def main(config) -> None:
    run_or_exit(config, SpinTaskRunner, SpinConfig)


if __name__ == "__main__":
    cli(main, SpinConfig)
