"""The reward model on the Megatron engine (verl's module path ``verl.workers.reward_model.megatron``)."""

from verl.workers.reward_model.megatron.reward_model import MegatronRewardModel

__all__ = ["MegatronRewardModel"]
