"""Entry point of the one-step off-policy recipe::

    python -m recipe.one_step_off_policy.main_ppo [key=value ...]

Composes ``recipe/one_step_off_policy/config/one_step_off_ppo_trainer.yaml`` (the PPO tree plus ``rollout.nnodes``,
``rollout.n_gpus_per_node``, ``actor_rollout_ref.hybrid_engine=False``), validates it before Ray starts, and runs
:class:`~recipe.one_step_off_policy.ray_trainer.OneStepOffRayTrainer`: the actor on ``trainer.nnodes`` x
``trainer.n_gpus_per_node`` devices, generation on ``rollout.nnodes`` x ``rollout.n_gpus_per_node`` more.
"""

from __future__ import annotations

from pathlib import Path

import hydra

from recipe.one_step_off_policy.config import OneStepOffConfig
from verl.trainer.main_ppo import TaskRunner, cli, run_or_exit

CONFIG_FILE = Path(__file__).parent / "config" / "one_step_off_ppo_trainer.yaml"
"""The recipe's root config (composed on top of ``ppo_trainer.yaml``)."""
SCHEMA = OneStepOffConfig
"""Its typed tree."""


class OneStepOffTaskRunner(TaskRunner):
    """Roles: ``actor`` (+ ``ref``, ``critic``) on the trainer pool, ``rollout`` on the rollout pool."""

    trainer_class = "recipe.one_step_off_policy.ray_trainer:OneStepOffRayTrainer"

    @staticmethod
    def _role_worker_mapping(config, use_critic: bool, use_reference_policy: bool) -> dict:
        from recipe.one_step_off_policy.workers import OneStepActorWorker, OneStepRolloutWorker
        from verl.trainer.ppo.utils import Role
        from verl.workers.fsdp_workers import ActorRolloutRefWorker, CriticWorker

        lora = config.actor_rollout_ref.model.lora_rank > 0
        mapping = {Role.Actor: OneStepActorWorker, Role.Rollout: OneStepRolloutWorker}
        if use_critic:
            mapping[Role.Critic] = CriticWorker
        if use_reference_policy and not lora:
            mapping[Role.RefPolicy] = ActorRolloutRefWorker
        return mapping


@hydra.main(config_path="config", config_name=CONFIG_FILE.stem, version_base=None)
def main(config) -> None:
    run_or_exit(config, OneStepOffTaskRunner, OneStepOffConfig)


if __name__ == "__main__":
    cli(main, OneStepOffConfig)
