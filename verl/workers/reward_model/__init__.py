"""Model-based rewards: the discriminative reward-model role on the FSDP2 engine (``role``, ``loading``,
``inputs``, ``dp_reward_model``) and the generative judge (``judge``). See ``docs/reward_model.md``."""
