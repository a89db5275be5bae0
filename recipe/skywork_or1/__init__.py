"""Skywork-OR1's training recipe: adaptive entropy control (``actor_rollout_ref.actor.adaptive_entropy``) and
multi-stage training with growing response length (``recipe.skywork_or1.multi_stage``)."""
