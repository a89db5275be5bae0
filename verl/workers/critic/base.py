"""Interface every PPO critic implements."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from verl.protocol import DataProto


class BasePPOCritic(ABC):
    def __init__(self, config):
        self.config = config

    @abstractmethod
    def compute_values(self, data: DataProto) -> torch.Tensor:
        """Values ``(bs, R)`` for the response tokens."""

    @abstractmethod
    def update_critic(self, data: DataProto) -> dict:
        """Fit the value function to ``returns``; returns metrics (name -> list of values)."""
