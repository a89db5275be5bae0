"""Reference-policy config (``actor_rollout_ref.ref``): frozen log-probs for the KL terms."""

from __future__ import annotations

from dataclasses import dataclass

from verl.workers.config.roles import ForwardConfig, LogProbConfig


@dataclass
class RefConfig(ForwardConfig, LogProbConfig):
    """The frozen reference policy; the shipped YAML ties its forward options to the actor's."""
