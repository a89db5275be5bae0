"""Model-based rewards: the discriminative reward-model role (``role``, ``loading``, ``inputs``, the scorer contract
``base``) on the FSDP2 engine (``dp_reward_model``) or the Megatron engine (``megatron``), and the generative judge
(``judge``). See ``docs/reward_model.md``."""
