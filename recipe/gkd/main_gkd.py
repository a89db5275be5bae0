"""Entry point of the on-policy distillation recipe::

    python -m recipe.gkd.main_gkd [key=value ...]

Composes ``recipe/gkd/config/on_policy_distill_trainer.yaml`` (the PPO tree plus ``actor_rollout_ref.teacher`` and
``actor_rollout_ref.actor.distill``), validates it before Ray starts, and runs
:class:`~recipe.gkd.ray_trainer.OnPolicyDistillTrainer`: the student's actor/rollout group and the ``teacher`` group,
colocated on ``global_pool`` unless ``trainer.placement.roles.teacher`` gives the teacher its own pool.
"""

from __future__ import annotations

from pathlib import Path

import hydra

from recipe.gkd.config import DistillPPOConfig
from verl.trainer.main_ppo import TaskRunner, cli, run_or_exit

CONFIG_FILE = Path(__file__).parent / "config" / "on_policy_distill_trainer.yaml"
"""The recipe's root config (composed on top of ``ppo_trainer.yaml``)."""
SCHEMA = DistillPPOConfig
"""Its typed tree."""


class DistillTaskRunner(TaskRunner):
    trainer_class = "recipe.gkd.ray_trainer:OnPolicyDistillTrainer"

    @staticmethod
    def _role_worker_mapping(config, use_critic: bool, use_reference_policy: bool) -> dict:
        from recipe.gkd.teacher import TeacherWorker
        from recipe.gkd.workers import StudentWorker
        from verl.trainer.ppo.utils import Role

        return {Role.ActorRollout: StudentWorker, "teacher": TeacherWorker}


@hydra.main(config_path="config", config_name=CONFIG_FILE.stem, version_base=None)
def main(config) -> None:
    run_or_exit(config, DistillTaskRunner, DistillPPOConfig)


if __name__ == "__main__":
    cli(main, DistillPPOConfig)
