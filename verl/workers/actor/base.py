"""Interface every PPO actor implements."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from verl.protocol import DataProto


class BasePPOActor(ABC):
    def __init__(self, config):
        self.config = config

    @abstractmethod
    def compute_log_prob(self, data: DataProto, calculate_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs ``(bs, R)`` of ``data.batch['responses']`` (and entropy ``(bs, R)`` or None)."""

    @abstractmethod
    def update_policy(self, data: DataProto) -> dict:
        """Run the PPO update on ``data``; returns metrics (name -> list of values)."""

    def output_layer_tokens(self, data: DataProto) -> int | None:
        """How many positions of ``data`` (this rank's rows) a log-prob pass runs the output layer on, for the MFU
        metric; None: every token (the default)."""
        return None
