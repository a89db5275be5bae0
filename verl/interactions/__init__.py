"""Interactions: a simulated user that answers each assistant turn of a multi-turn rollout (verl's
``verl.interactions``). Listed in the YAML of ``rollout.multi_turn.interaction_config_path``; a row picks one by
``interaction_kwargs.name``."""

from verl.interactions.base import BaseInteraction

__all__ = ["BaseInteraction"]
