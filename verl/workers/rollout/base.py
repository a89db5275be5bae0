"""The rollout interface: prompts in, sampled responses with the engine's own log-probs out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from verl.protocol import DataProto

if TYPE_CHECKING:
    from verl.workers.config.model import ModelSourceConfig
    from verl.workers.config.rollout import RolloutConfig


class BaseRollout(ABC):
    """A generation backend chosen by ``actor_rollout_ref.rollout.name`` (see :mod:`verl.workers.rollout.registry`).

    Constructed as ``cls(config, model_config, tokenizer, actor_module=None, device_mesh=None)``.
    """

    def __init__(
        self,
        config: RolloutConfig,
        model_config: ModelSourceConfig,
        tokenizer: Any,
        actor_module: Any = None,
        device_mesh=None,
    ):
        self.config = config
        self.model_config = model_config
        self.tokenizer = tokenizer
        self.device_mesh = device_mesh

    @abstractmethod
    def generate_sequences(self, prompts: DataProto) -> DataProto:
        """Sample responses for left-padded ``prompts`` (``input_ids``, ``attention_mask``, ``position_ids``: (bs, P)).

        Returns ``bs * n`` rows, prompt i's samples contiguous: ``prompts (bs*n, P)``, ``responses (bs*n, R)``
        right-padded with the pad id, ``input_ids``/``attention_mask``/``position_ids (bs*n, P+R)``,
        ``response_mask (bs*n, R)`` (1 up to and including the first EOS) and, when ``calculate_log_probs`` is set
        (engines may return them anyway), ``rollout_log_probs (bs*n, R)`` (log-prob of each sampled token under
        the engine's processed distribution; 0 on padding).
        """

    @abstractmethod
    def make_sharding_manager(self, actor_module: Any):
        """The weight-sync context manager that moves ``actor_module``'s weights into this rollout on enter."""
