"""Trainer side of verl: entry points, the PPO loop, and the config tree.

Importing this package registers the typed config schema with Hydra's ConfigStore, so
``@hydra.main(config_path="config", config_name="ppo_trainer")`` finds ``ppo_trainer_schema``.
"""

import verl.trainer.config  # noqa: F401  (registers ppo_trainer_schema)
