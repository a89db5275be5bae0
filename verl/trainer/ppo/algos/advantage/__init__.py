"""Built-in advantage estimators; importing this package registers them."""

from .gae import compute_gae_advantage_return
from .gpg import compute_gpg_outcome_advantage
from .grpo import (
    compute_grpo_outcome_advantage,
    compute_grpo_passk_outcome_advantage,
    compute_grpo_vectorized_outcome_advantage,
)
from .opo import compute_opo_outcome_advantage
from .optimal_token_baseline import compute_optimal_token_baseline_advantage
from .reinforce_plus_plus import (
    compute_reinforce_plus_plus_baseline_outcome_advantage,
    compute_reinforce_plus_plus_outcome_advantage,
)
from .remax import compute_remax_outcome_advantage
from .rloo import compute_rloo_outcome_advantage, compute_rloo_vectorized_outcome_advantage

__all__ = [
    "compute_gae_advantage_return",
    "compute_gpg_outcome_advantage",
    "compute_grpo_outcome_advantage",
    "compute_grpo_passk_outcome_advantage",
    "compute_grpo_vectorized_outcome_advantage",
    "compute_opo_outcome_advantage",
    "compute_optimal_token_baseline_advantage",
    "compute_reinforce_plus_plus_baseline_outcome_advantage",
    "compute_reinforce_plus_plus_outcome_advantage",
    "compute_remax_outcome_advantage",
    "compute_rloo_outcome_advantage",
    "compute_rloo_vectorized_outcome_advantage",
]
