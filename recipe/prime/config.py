"""Config of the PRIME recipe: the PPO tree plus PRIME's keys (verl's names).

- ``data.filter_accuracy`` / ``accuracy_lower_bound`` / ``accuracy_upper_bound`` / ``oversample_factor`` /
  ``filter_truncate``: oversample prompts, keep groups of middling accuracy first;
- ``reward_model.*``: the implicit PRM (``model.path``, ``model.update``, ``model.beta_train``, ``model.optim``,
  ``prime_granularity``, ``prime_norm``, ``mini_batch_size``, ...);
- ``algorithm.reward_dpo_coef`` / ``reward_gt_coef``: weights of the implicit and the outcome rewards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.trainer.config.algorithm import AlgoConfig
from verl.trainer.config.data import DataConfig
from verl.trainer.config.extend import extend_config
from verl.trainer.config.root import PPOConfig
from verl.trainer.config.schema import register_schema
from verl.workers.config.base import bounded_field, choice_field
from verl.workers.config.model import HFModelConfig
from verl.workers.config.optimizer import OptimConfig
from verl.workers.config.reward_model import RewardModelConfig
from verl.workers.config.roles import EngineRoleConfig, FSDPHolderConfig

SCHEMA_NAME = "prime_trainer_schema"
UPDATE_STYLES = ("before", "after", "none")
"""``before``: update the PRM, then score with it (two forwards); ``after``: score with the forward of the update
(one forward, scores from before the step); ``none``: a frozen PRM."""


@dataclass
class PrimeDataConfig(DataConfig):
    """Prompt data with PRIME's oversampling and accuracy filter."""

    filter_accuracy: bool = True
    """Prefer prompts whose group accuracy lies in [accuracy_lower_bound, accuracy_upper_bound]."""

    accuracy_lower_bound: float = bounded_field(0.2, ge=0.0, le=1.0)
    """Lowest group accuracy a preferred prompt may have."""

    accuracy_upper_bound: float = bounded_field(0.8, ge=0.0, le=1.0)
    """Highest group accuracy a preferred prompt may have."""

    oversample_factor: float = bounded_field(4.0, ge=1.0)
    """Prompts drawn per step: ``train_batch_size * oversample_factor``; ``train_batch_size`` of them are kept,
    those passing the filters first."""

    filter_truncate: bool = False
    """Also demote prompts whose longest response hit ``max_response_length``."""


@dataclass
class PrimeOptimConfig(OptimConfig):
    """The PRM's optimizer (a constant learning rate by default, as in verl's recipe)."""

    grad_clip: float = bounded_field(1.0, gt=0.0)
    """Maximum global gradient norm of the PRM update (verl's ``reward_model.model.optim.grad_clip``)."""


@dataclass
class PrimeRewardModelModelConfig(HFModelConfig, FSDPHolderConfig):
    """The implicit PRM π_φ and its frozen reference π_ref (both causal LMs sharing the policy's tokenizer)."""

    path: str = "default"
    """PRM initial weights; the recipe YAML sets the policy's path (PRIME starts the PRM from the SFT model)."""

    ref_path: str | None = None
    """Reference of the log-ratio; null uses ``path``."""

    ref_type: str = choice_field("freeze", ("freeze",))
    """How the reference evolves: ``freeze`` keeps the initial weights."""

    input_tokenizer: str | None = None
    """Tokenizer of the policy when it differs from the PRM's; only null (a shared tokenizer) is supported."""

    update: str = choice_field("before", UPDATE_STYLES)
    """When the PRM trains relative to scoring (``before``, ``after``, ``none``; see ``UPDATE_STYLES``)."""

    beta_train: float = bounded_field(0.05, gt=0.0)
    """β of the implicit reward ``β log(π_φ / π_ref)`` and of its cross-entropy loss."""

    loss_type: str = choice_field("ce", ("ce",))
    """PRM loss: ``ce`` is the cross-entropy of σ(β Σ_t log-ratio) against the outcome (PRIME eq. 4)."""

    optim: PrimeOptimConfig = field(default_factory=lambda: PrimeOptimConfig(lr=1e-6))
    """The PRM's optimizer."""


@dataclass
class PrimeRewardModelConfig(RewardModelConfig, EngineRoleConfig):
    """Rule rewards (the reward manager: the outcome ``acc``) plus PRIME's implicit PRM."""

    enable: bool = choice_field(True, (True, False))
    """Train and use the implicit PRM; false runs RLOO on the outcome rewards alone."""

    model: PrimeRewardModelModelConfig = field(default_factory=PrimeRewardModelModelConfig)
    """The PRM and its reference."""

    prime_granularity: str = choice_field("token", ("token", "whole"))
    """``token``: a reward per response token; ``whole``: their sum on the last token."""

    prime_norm: str = choice_field("batch_norm", ("batch_norm", "none"))
    """``batch_norm`` divides the implicit rewards by the batch's largest absolute return-to-go."""

    mini_batch_size: int | None = bounded_field(None, gt=0)
    """Prompts per PRM optimizer step (times ``rollout.n`` sequences); null uses the actor's ppo_mini_batch_size."""

    micro_batch_size_per_gpu: int = bounded_field(8, gt=0)
    """Sequences per PRM forward/backward pass on one worker."""

    use_dynamic_bsz: bool = False
    """Form PRM micro-batches by token count (``ppo_max_token_len_per_gpu``)."""

    ppo_max_token_len_per_gpu: int = bounded_field(16384, gt=0)
    """Token budget of one PRM micro-batch when ``use_dynamic_bsz`` is true."""


@dataclass
class PrimeAlgoConfig(AlgoConfig):
    """The advantage: PRIME's leave-one-out over the implicit and the outcome rewards."""

    reward_dpo_coef: float = bounded_field(5.0, ge=0.0)
    """Weight of the implicit process rewards in the advantage."""

    reward_gt_coef: float = bounded_field(5.0, ge=0.0)
    """Weight of the outcome (ground-truth) reward in the advantage."""


def prime_errors(config: Any) -> list[str]:
    """PRIME's own consistency checks."""
    from recipe.prime.prime_core_algos import PRIME_ADV_ESTIMATOR_REGISTRY

    errors = []
    data, algo, rm = config.data, config.algorithm, config.reward_model
    error = PRIME_ADV_ESTIMATOR_REGISTRY.error(algo.adv_estimator)
    if error is not None:
        errors.append(error)
    if data.accuracy_lower_bound > data.accuracy_upper_bound:
        errors.append(
            f"data.accuracy_lower_bound={data.accuracy_lower_bound} exceeds data.accuracy_upper_bound="
            f"{data.accuracy_upper_bound}"
        )
    if data.gen_batch_size is not None:
        errors.append("data.gen_batch_size is not used by PRIME: it draws train_batch_size * oversample_factor prompts")
    if algo.use_kl_in_reward:
        errors.append(
            "algorithm.use_kl_in_reward=True: PRIME's advantage uses the implicit and outcome rewards only; use "
            "actor_rollout_ref.actor.use_kl_loss=True for a KL term"
        )
    if algo.filter_groups.enable:
        errors.append("algorithm.filter_groups.enable=True: PRIME filters with data.filter_accuracy instead")
    if config.actor_rollout_ref.rollout.n < 2:
        errors.append("PRIME's leave-one-out advantage needs actor_rollout_ref.rollout.n >= 2")
    if rm.enable and rm.model.input_tokenizer is not None:
        errors.append("reward_model.model.input_tokenizer must be null: the PRM reads the policy's tokens")
    if rm.enable and rm.ulysses_sequence_parallel_size > 1:
        errors.append(
            "reward_model.ulysses_sequence_parallel_size > 1: the implicit PRM runs without sequence parallelism"
        )
    if rm.combine.weights or rm.combine.data_sources:
        errors.append(
            "reward_model.combine is not used by PRIME: the outcome reward is the reward manager's score and the "
            "PRM's token rewards are weighted by algorithm.reward_dpo_coef / reward_gt_coef; remove the combine keys"
        )
    if rm.enable and algo.reward_dpo_coef == 0 and rm.model.update == "none":
        errors.append("reward_model.enable=True with reward_dpo_coef=0 and update=none does nothing; disable the PRM")
    return errors


PrimeConfig = extend_config(
    PPOConfig,
    "PrimeConfig",
    {"data": PrimeDataConfig, "reward_model": PrimeRewardModelConfig, "algorithm": PrimeAlgoConfig},
    checks=prime_errors,
    namespace={"worker_groups": ("reward_model",), "recipe_owned_sections": ("reward_model",)},
)
"""``prime_trainer.yaml``'s tree."""

register_schema(SCHEMA_NAME, f"{__name__}:PrimeConfig")
