"""Reward config (``reward_model``): which reward manager turns responses into token-level scores."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.workers.config.base import BaseConfig, bounded_field, pinned_field, registry_field


@dataclass
class OverlongBufferConfig(BaseConfig):
    """DAPO's soft overlong punishment (arXiv:2503.14476, eq. 13): a linear penalty near the length limit."""

    enable: bool = False
    """Penalise responses that enter the last ``len`` tokens before ``data.max_response_length``."""

    len: int = bounded_field(0, ge=0)
    """Length of the penalty zone in tokens."""

    penalty_factor: float = bounded_field(1.0, ge=0.0)
    """Penalty at the length limit; it grows linearly from 0 at the start of the zone."""

    log: bool = False
    """Report the overlong penalty in the reward's extra info."""


@dataclass
class SandboxFusionConfig(BaseConfig):
    """A SandboxFusion server that runs code responses against their test cases (code data sources)."""

    url: str | None = None
    """``run_code`` endpoint of the server; null runs the tests locally in bounded subprocesses."""

    max_concurrent: int = bounded_field(64, gt=0)
    """Requests in flight to the server at once, per process."""

    memory_limit_mb: int = bounded_field(1024, gt=0)
    """Memory limit of one run in the sandbox."""


@dataclass
class RewardModelConfig(BaseConfig):
    """Rule-based rewards through a registered reward manager (model-based reward models are not built in)."""

    enable: bool = pinned_field(False, (False,), "a model-based reward model", 19)
    """Score with a learned reward model; not available yet (issue 19)."""

    reward_manager: str = registry_field("naive", "verl.workers.reward_manager.registry:REWARD_MANAGER_REGISTRY")
    """Registered reward manager (``verl.workers.reward_manager.get_reward_manager_cls``): e.g. naive, dapo."""

    launch_reward_fn_async: bool = False
    """Compute rewards in a Ray task that overlaps the log-prob computations."""

    reward_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments of the reward manager's constructor (verl's DAPO scripts pass
    ``+reward_model.reward_kwargs.overlong_buffer_cfg.*`` and ``max_resp_len`` here; they take precedence
    over ``overlong_buffer``)."""

    sandbox_fusion: SandboxFusionConfig = field(default_factory=SandboxFusionConfig)
    """Where code responses are executed (``default_compute_score``'s ``sandbox_fusion_url``)."""

    overlong_buffer: OverlongBufferConfig = field(default_factory=OverlongBufferConfig)
    """DAPO overlong-buffer penalty used by the ``dapo`` reward manager."""
