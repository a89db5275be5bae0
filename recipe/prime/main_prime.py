"""Entry point of the PRIME recipe::

    python -m recipe.prime.main_prime [key=value ...]

Composes ``recipe/prime/config/prime_trainer.yaml`` (the PPO tree plus PRIME's keys), validates it before Ray
starts, and runs :class:`~recipe.prime.prime_ray_trainer.RayPRIMETrainer` with the implicit PRM as the
``reward_model`` worker group (on the actor's devices unless ``trainer.placement.roles.reward_model`` moves it).
"""

from __future__ import annotations

import copy
from pathlib import Path

import hydra

from recipe.prime.config import PrimeConfig
from verl.trainer.main_ppo import TaskRunner, cli, run_or_exit

CONFIG_FILE = Path(__file__).parent / "config" / "prime_trainer.yaml"
"""The recipe's root config (composed on top of ``ppo_trainer.yaml``)."""
SCHEMA = PrimeConfig
"""Its typed tree."""


class PrimeTaskRunner(TaskRunner):
    """Actor/rollout (+ reference) and, with ``reward_model.enable``, the implicit PRM."""

    trainer_class = "recipe.prime.prime_ray_trainer:RayPRIMETrainer"

    @staticmethod
    def _reward_functions(config, tokenizer) -> tuple:
        """The outcome verifier alone: PRIME's ``reward_model`` is the implicit PRM, whose token rewards enter the
        advantage (``algorithm.reward_dpo_coef``) instead of adding to the verifier's score."""
        outcome = copy.copy(config)
        outcome.reward_model = copy.copy(config.reward_model)
        outcome.reward_model.enable = False
        return TaskRunner._reward_functions(outcome, tokenizer)

    @staticmethod
    def _role_worker_mapping(config, use_critic: bool, use_reference_policy: bool) -> dict:
        """The policy's groups as in the PPO trainer, and the implicit PRM in place of its reward model (PRIME's
        ``reward_model`` section is the PRM)."""
        from recipe.prime.prime_fsdp_workers import PRIMERewardModelWorker
        from verl.trainer.ppo.utils import Role
        from verl.workers.worker_registry import get_worker_classes

        actor_rollout_ref = get_worker_classes(config.actor_rollout_ref.actor.strategy).actor_rollout_ref
        mapping = {Role.ActorRollout: actor_rollout_ref}
        if use_reference_policy and config.actor_rollout_ref.model.lora_rank == 0:
            mapping[Role.RefPolicy] = actor_rollout_ref
        if config.reward_model.enable:
            mapping["reward_model"] = PRIMERewardModelWorker
        return mapping


@hydra.main(config_path="config", config_name=CONFIG_FILE.stem, version_base=None)
def main(config) -> None:
    run_or_exit(config, PrimeTaskRunner, PrimeConfig)


if __name__ == "__main__":
    cli(main, PrimeConfig)
