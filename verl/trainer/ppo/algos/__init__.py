"""The RL algorithms: advantage estimators, policy losses, KL, aggregation, rollout correction.

One small module per idea; ``verl.trainer.ppo.core_algos`` re-exports the public surface under verl's names.
The registries (:mod:`.registry`) import a built-in estimator or loss on its first lookup, so importing this
package is cheap.
"""
