"""``BaseInteraction``: the user side of a multi-turn rollout (verl's ``verl.interactions.base``).

The agent loop calls ``start_interaction(instance_id, **interaction_kwargs)`` once per trajectory, then after every
assistant turn ``generate_response(instance_id, messages, **interaction_kwargs)``, which returns
``(should_terminate_sequence, response_content, turn_score, metrics)``; the response becomes the next user message
(masked out of the loss) unless the episode ends. ``finalize_interaction(instance_id)`` frees the state.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4


class BaseInteraction:
    """An interaction; ``config`` is the ``config`` mapping of its YAML entry (``name`` defaults to the entry's)."""

    def __init__(self, config: dict[str, Any]):
        self.config = dict(config or {})
        self.name: str = self.config.get("name", "interaction_agent")

    async def start_interaction(self, instance_id: str | None = None, **kwargs) -> str:
        """Start the state of one trajectory; returns its id."""
        return instance_id or str(uuid4())

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs
    ) -> tuple[bool, str, float, dict[str, Any]]:
        """Answer the conversation so far: ``(should_terminate_sequence, response_content, turn_score, metrics)``."""
        return False, "Your current result seems acceptable.", 0.0, {}

    async def calculate_score(self, instance_id: str, **kwargs) -> float:
        """The score of the trajectory's current state."""
        return 0.0

    async def finalize_interaction(self, instance_id: str, **kwargs) -> None:
        """Free the trajectory's state."""
