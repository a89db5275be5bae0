"""The RL algorithms: advantage estimators, policy losses, KL, aggregation, rollout correction.

One small module per idea; ``verl.trainer.ppo.core_algos`` re-exports the public surface under verl's names.
Importing this package registers every built-in estimator and policy loss.
"""

from . import advantage, policy_loss  # noqa: F401  (registration side effects)
