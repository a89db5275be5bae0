"""Inference servers of ``rollout.mode=async``: an engine that takes single requests at any time.

In the hybrid engine each actor-rollout worker holds its rollout engine (built exactly as for ``sync``, with the
same weight-sync manager) and an :class:`AsyncRolloutServer` around it. The first rank of each tensor-parallel
group is the replica's entry point: agent loops send it one request per model turn
(:meth:`AsyncRolloutServer.generate`), and it batches whatever is in flight (continuous batching). Lifecycle, driven
by ``AgentLoopManager`` through the worker group:

    wake_up:  sharding manager enter (weights synced, engine awake) -> server.start()
    generate: any number of concurrent calls on each replica's first rank
    sleep:    server.stop() -> sharding manager exit (engine memory released)

Backends register with :func:`register_async_server` under their ``rollout.name``.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ASYNC_SERVER_REGISTRY: dict[str, type] = {}
_BUILTIN_MODULES = {"vllm": "verl.workers.rollout.vllm_rollout.vllm_async_server"}
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "max_tokens",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "logprobs",
)
"""Keys an agent loop may put in ``sampling_params``; ``logprobs`` (default True) asks for the engine's log-prob of
each sampled token (``rollout.calculate_log_probs`` in the agent-loop workers)."""


@dataclass
class TokenOutput:
    """One model turn: the sampled ``token_ids`` (EOS included when the turn ended on it), the engine's log-prob of
    each (``log_probs``, same length; None when not asked for) and why it stopped: ``stop`` (EOS), ``length``
    (``max_tokens``) or ``abort``."""

    token_ids: list[int]
    log_probs: list[float] | None = None
    stop_reason: str | None = None


class AsyncRolloutServer(ABC):
    """A request server around a rollout engine (one per worker; the tensor-parallel leader takes requests)."""

    def __init__(self, rollout: Any) -> None:
        self.rollout = rollout

    @property
    @abstractmethod
    def is_leader(self) -> bool:
        """Whether this worker takes the replica's requests (first rank of its tensor-parallel group)."""

    @abstractmethod
    def start(self) -> None:
        """Begin serving (every rank of the replica calls it, after the weights are synced)."""

    @abstractmethod
    def stop(self) -> None:
        """Finish in-flight requests and stop serving (every rank, before the engine sleeps)."""

    @abstractmethod
    def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str) -> TokenOutput:
        """Sample one turn continuing ``prompt_ids``; blocks until it is done; safe to call from many threads."""


def register_async_server(name: str) -> Callable[[type], type]:
    """Class decorator: ``@register_async_server("vllm")`` serves ``rollout.name=vllm`` in ``mode=async``."""

    def decorator(cls: type) -> type:
        existing = ASYNC_SERVER_REGISTRY.get(name)
        if existing is not None and existing is not cls:
            raise ValueError(f"async server {name!r} is already registered to {existing.__qualname__}")
        ASYNC_SERVER_REGISTRY[name] = cls
        return cls

    return decorator


def async_server_names() -> list[str]:
    """Rollout names that have an async server (registered or built in)."""
    return sorted(set(ASYNC_SERVER_REGISTRY) | set(_BUILTIN_MODULES))


def get_async_server_class(name: str) -> type:
    """The server class for ``rollout.name``; unknown names fail listing the ones that have a server."""
    if name not in ASYNC_SERVER_REGISTRY and name in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[name])
    if name not in ASYNC_SERVER_REGISTRY:
        raise ValueError(
            f"actor_rollout_ref.rollout.name={name!r} has no async server for rollout.mode=async; "
            f"available: {async_server_names()} (or set rollout.mode=sync)"
        )
    return ASYNC_SERVER_REGISTRY[name]


def check_sampling_params(sampling_params: dict[str, Any]) -> None:
    """Reject keys the servers do not understand, naming the allowed ones."""
    unknown = sorted(set(sampling_params) - set(SAMPLING_KEYS))
    if unknown:
        raise ValueError(f"sampling_params has unknown keys {unknown}; allowed: {list(SAMPLING_KEYS)}")
