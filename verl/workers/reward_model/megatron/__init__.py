"""The reward model on the Megatron engine (verl's module path ``verl.workers.reward_model.megatron``)."""
