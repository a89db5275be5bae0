"""Config of the SPIN recipe: the PPO tree plus the self-play loss (``algorithm.dpo_*``), the reference refresh
(``trainer.ref_update_freq``) and where the SFT target of each prompt is (``data.response_key``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recipe.spin.core_algos import DPO_LOSS_TYPES
from verl.trainer.config.algorithm import AlgoConfig
from verl.trainer.config.data import DataConfig
from verl.trainer.config.extend import extend_config
from verl.trainer.config.root import PPOConfig
from verl.trainer.config.schema import register_schema
from verl.trainer.config.trainer import TrainerConfig
from verl.workers.config.base import bounded_field, choice_field

SCHEMA_NAME = "spin_trainer_schema"


@dataclass
class SpinDataConfig(DataConfig):
    """Prompts with their SFT targets."""

    response_key: str = "extra_info.answer"
    """Dotted path of the target response in each row (verl's SFT key; the built-in arithmetic rows have
    ``extra_info.answer`` = ``#### <value>``)."""


@dataclass
class SpinAlgoConfig(AlgoConfig):
    """The self-play loss."""

    dpo_beta: float = bounded_field(0.1, gt=0.0)
    """λ of SPIN (β of DPO): scale of the log-ratio difference."""

    dpo_loss_type: str = choice_field("sigmoid", DPO_LOSS_TYPES)
    """``sigmoid``: SPIN's logistic loss; ``ipo``: IPO's squared loss."""

    dpo_label_smoothing: float = bounded_field(0.0, ge=0.0, le=0.5)
    """Conservative DPO: assumed probability that a pair's preference is flipped (``sigmoid`` only)."""


@dataclass
class SpinTrainerConfig(TrainerConfig):
    """The run, plus SPIN's iteration length."""

    ref_update_freq: int = bounded_field(1, gt=0)
    """Steps between resets of the reference (the opponent p_θt) to the current actor."""


def spin_errors(config: Any) -> list[str]:
    errors = []
    arr = config.actor_rollout_ref
    actor = arr.actor
    if arr.ref is None:
        errors.append("actor_rollout_ref.ref is null: SPIN's loss needs the reference (the previous iteration)")
    if arr.model.lora_rank > 0:
        errors.append("actor_rollout_ref.model.lora_rank > 0: SPIN refreshes a full reference copy; train all weights")
    if actor.use_dynamic_bsz or actor.shuffle:
        errors.append(
            "actor_rollout_ref.actor.use_dynamic_bsz / shuffle must be False for SPIN: micro-batches must keep each "
            "(target, sample) pair together"
        )
    micro = actor.ppo_micro_batch_size_per_gpu
    if micro is not None and micro % 2:
        errors.append(
            f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro} must be even for SPIN (pairs of rows)"
        )
    if actor.use_kl_loss or config.algorithm.use_kl_in_reward:
        errors.append("SPIN's loss already regularises towards the reference: turn use_kl_loss / use_kl_in_reward off")
    if "ref" in (config.trainer.placement.roles or {}):
        errors.append("trainer.placement.roles.ref: SPIN keeps the reference in the actor's worker (it copies weights)")
    return errors


SpinConfig = extend_config(
    PPOConfig,
    "SpinConfig",
    {"data": SpinDataConfig, "algorithm": SpinAlgoConfig, "trainer": SpinTrainerConfig},
    checks=spin_errors,
)
"""``spin_trainer.yaml``'s tree."""

register_schema(SCHEMA_NAME, f"{__name__}:SpinConfig")
