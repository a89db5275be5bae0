"""Config of the on-policy distillation (GKD) recipe: the PPO tree plus the teacher
(``actor_rollout_ref.teacher``) and the student's loss (``actor_rollout_ref.actor.distill``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.trainer.config.extend import extend_config
from verl.trainer.config.root import PPOConfig
from verl.trainer.config.schema import register_schema
from verl.workers.config.base import BaseConfig, bounded_field, registry_field
from verl.workers.config.model import HFModelConfig
from verl.workers.config.roles import EngineRoleConfig, FSDPHolderConfig, LogProbConfig

SCHEMA_NAME = "on_policy_distill_trainer_schema"


@dataclass
class TeacherConfig(EngineRoleConfig, FSDPHolderConfig, LogProbConfig):
    """The frozen teacher that scores the student's samples (same tokenizer as the student)."""

    model: HFModelConfig = field(default_factory=HFModelConfig)
    """Teacher weights; ``default`` is the embedded SmolLM2-135M-Instruct."""

    topk: int = bounded_field(64, gt=0)
    """Teacher tokens per position the loss compares over (its k most likely; the vocabulary size is exact)."""


@dataclass
class DistillConfig(BaseConfig):
    """The student's loss: a divergence to the teacher per response token, aggregated by ``loss_agg_mode``."""

    loss_type: str = registry_field("reverse_kl", "recipe.gkd.distill_losses:DISTILL_LOSS_REGISTRY")
    """Registered divergence (``recipe.gkd.distill_losses``): ``reverse_kl`` KL(student || teacher), ``forward_kl``
    KL(teacher || student), or ``jsd`` (GKD's generalized JSD with ``beta``)."""

    beta: float = bounded_field(0.5, ge=0.0, le=1.0)
    """``jsd``: weight of the teacher in the mixture ``M = beta P_teacher + (1 - beta) P_student``."""

    loss_coef: float = bounded_field(1.0, gt=0.0)
    """Scale of the distillation loss."""


def distill_errors(config: Any) -> list[str]:
    errors = []
    actor = config.actor_rollout_ref.actor
    if actor.use_kl_loss or config.algorithm.use_kl_in_reward:
        errors.append(
            "on-policy distillation trains on the divergence to the teacher only: set "
            "actor_rollout_ref.actor.use_kl_loss=False and algorithm.use_kl_in_reward=False"
        )
    if actor.adaptive_entropy.enabled or actor.entropy_coeff != 0:
        errors.append("actor_rollout_ref.actor.entropy_coeff / adaptive_entropy are not used by the distillation loss")
    if config.critic.enable:
        errors.append("critic.enable=True: on-policy distillation has no critic")
    if actor.ulysses_sequence_parallel_size > 1:
        errors.append(
            "actor_rollout_ref.actor.ulysses_sequence_parallel_size > 1: the distillation loss reads full-vocabulary "
            "logits of the padded batch, which sequence parallelism splits; set it to 1"
        )
    return errors


DistillPPOConfig = extend_config(
    PPOConfig,
    "DistillPPOConfig",
    {"actor_rollout_ref.teacher": TeacherConfig, "actor_rollout_ref.actor.distill": DistillConfig},
    checks=distill_errors,
    namespace={"worker_groups": ("teacher",)},
)
"""``on_policy_distill_trainer.yaml``'s tree."""

register_schema(SCHEMA_NAME, f"{__name__}:DistillPPOConfig")
