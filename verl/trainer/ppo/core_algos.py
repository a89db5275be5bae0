"""verl's algorithm surface, re-exported from the :mod:`verl.trainer.ppo.algos` package.

Everything here is importable as in public verl (``from verl.trainer.ppo.core_algos import agg_loss``);
the implementations live in small modules under ``verl/trainer/ppo/algos/``.
"""

from .algos.advantage import (
    compute_gae_advantage_return,
    compute_gpg_outcome_advantage,
    compute_grpo_outcome_advantage,
    compute_grpo_passk_outcome_advantage,
    compute_grpo_vectorized_outcome_advantage,
    compute_opo_outcome_advantage,
    compute_optimal_token_baseline_advantage,
    compute_reinforce_plus_plus_baseline_outcome_advantage,
    compute_reinforce_plus_plus_outcome_advantage,
    compute_remax_outcome_advantage,
    compute_rloo_outcome_advantage,
    compute_rloo_vectorized_outcome_advantage,
)
from .algos.aggregation import LOSS_AGG_MODES, agg_loss
from .algos.batch_ops import apply_kl_penalty, compute_advantage
from .algos.kl import KL_ESTIMATORS, kl_penalty
from .algos.kl_controller import AdaptiveKLController, FixedKLController, get_kl_controller
from .algos.policy_loss import (
    compute_policy_loss_cispo,
    compute_policy_loss_clip_cov,
    compute_policy_loss_geo_mean,
    compute_policy_loss_gpg,
    compute_policy_loss_gspo,
    compute_policy_loss_kl_cov,
    compute_policy_loss_sapo,
    compute_policy_loss_vanilla,
)
from .algos.registry import (
    ADV_ESTIMATOR_REGISTRY,
    POLICY_LOSS_REGISTRY,
    AdvantageEstimator,
    get_adv_estimator_fn,
    get_policy_loss_fn,
    register_adv_est,
    register_policy_loss,
)
from .algos.rollout_correction import (
    compute_offpolicy_metrics,
    compute_rollout_correction_and_add_to_batch,
    compute_rollout_correction_and_rejection_mask,
)
from .algos.value_loss import compute_entropy_loss, compute_value_loss, entropy_from_logits

__all__ = [
    "ADV_ESTIMATOR_REGISTRY",
    "KL_ESTIMATORS",
    "LOSS_AGG_MODES",
    "POLICY_LOSS_REGISTRY",
    "AdaptiveKLController",
    "AdvantageEstimator",
    "FixedKLController",
    "agg_loss",
    "apply_kl_penalty",
    "compute_advantage",
    "compute_entropy_loss",
    "compute_gae_advantage_return",
    "compute_gpg_outcome_advantage",
    "compute_grpo_outcome_advantage",
    "compute_grpo_passk_outcome_advantage",
    "compute_grpo_vectorized_outcome_advantage",
    "compute_offpolicy_metrics",
    "compute_opo_outcome_advantage",
    "compute_optimal_token_baseline_advantage",
    "compute_policy_loss_cispo",
    "compute_policy_loss_clip_cov",
    "compute_policy_loss_geo_mean",
    "compute_policy_loss_gpg",
    "compute_policy_loss_gspo",
    "compute_policy_loss_kl_cov",
    "compute_policy_loss_sapo",
    "compute_policy_loss_vanilla",
    "compute_reinforce_plus_plus_baseline_outcome_advantage",
    "compute_reinforce_plus_plus_outcome_advantage",
    "compute_remax_outcome_advantage",
    "compute_rloo_outcome_advantage",
    "compute_rloo_vectorized_outcome_advantage",
    "compute_rollout_correction_and_add_to_batch",
    "compute_rollout_correction_and_rejection_mask",
    "compute_value_loss",
    "entropy_from_logits",
    "get_adv_estimator_fn",
    "get_kl_controller",
    "get_policy_loss_fn",
    "kl_penalty",
    "register_adv_est",
    "register_policy_loss",
]
