"""The agent-loop interface: one ``AgentLoopBase`` instance per sample drives the inference servers turn by turn.

A loop gets the row's dataset fields (``raw_prompt`` messages, ``tools_kwargs``, ``interaction_kwargs``, ...)
and the sampling parameters, calls ``await self.server_manager.generate(request_id=..., prompt_ids=...,
sampling_params=...)`` as often as it likes, and returns an :class:`AgentLoopOutput`: the prompt ids and the
response ids with ``response_mask`` 1 on tokens the model sampled and 0 on tokens it did not (tool results, user
turns), plus the engine's log-probs of the sampled tokens.

Loops are looked up by name (the row's ``agent_name`` or ``rollout.agent.default_agent_loop``) in a registry:
``@register("my_agent")`` on the class, or an entry ``{name: my_agent, _target_: pkg.module.MyAgentLoop, ...}``
in the YAML of ``rollout.agent.agent_loop_config_path`` (extra keys become constructor keyword arguments).
"""

from __future__ import annotations

import asyncio
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from pydantic import BaseModel

BUILTIN_AGENT_LOOP_MODULES = (
    "verl.experimental.agent_loop.single_turn_agent_loop",
    "verl.experimental.agent_loop.tool_agent_loop",
)


class AgentLoopMetrics(BaseModel):
    """Seconds one trajectory spent waiting for the model and for tools."""

    generate_sequences: float = 0.0
    tool_calls: float = 0.0


class AgentLoopOutput(BaseModel):
    """One trajectory, unpadded.

    ``response_ids`` interleaves model turns and the tokens added between them (tool results, user turns);
    ``response_mask`` and ``response_logprobs`` (when given) have its length; ``num_turns`` counts the prompt's
    user turn, the model turns and the tool/user turns. ``extra_fields`` become per-sample non-tensor fields.
    """

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None = None
    multi_modal_data: dict[str, Any] | None = None
    reward_score: float | None = None
    num_turns: int = 0
    metrics: AgentLoopMetrics = AgentLoopMetrics()
    extra_fields: dict[str, Any] = {}


class TrainerConfigRef:
    """Holds the trainer config for a loop's constructor (verl passes it wrapped: ``trainer_config.config``)."""

    def __init__(self, config: Any) -> None:
        self.config = config


class AgentLoopBase(ABC):
    """Base of the agent loops. ``init_class`` runs once per class and process (heavy set-up: tools, parsers)."""

    _class_initialized = False

    def __init__(self, trainer_config: TrainerConfigRef, server_manager: Any, tokenizer: Any, processor: Any, **kwargs):
        self.init_class(config=trainer_config.config, tokenizer=tokenizer, processor=processor, **kwargs)
        self.config = trainer_config.config
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor
        self.loop = asyncio.get_running_loop()

    @classmethod
    def init_class(cls, config: Any, tokenizer: Any, processor: Any, **kwargs) -> None:
        """Set-up shared by every instance of the class in this process; runs once."""
        if cls._class_initialized:
            return
        cls._class_initialized = True

    @abstractmethod
    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        """Roll out one sample; ``kwargs`` are the row's non-tensor dataset fields."""


_agent_loop_registry: dict[str, dict[str, Any]] = {}
"""``agent_name`` -> ``{"_target_": "module.Class", **constructor kwargs}``."""


def register(agent_name: str) -> Callable[[type], type]:
    """Class decorator: ``@register("tool_agent")`` makes the loop selectable by ``agent_name``."""

    def decorator(subclass: type) -> type:
        target = f"{subclass.__module__}.{subclass.__qualname__}"
        existing = _agent_loop_registry.get(agent_name)
        if existing is not None and existing["_target_"] != target:
            raise ValueError(f"agent loop {agent_name!r} is already registered to {existing['_target_']}")
        _agent_loop_registry[agent_name] = {"_target_": target}
        return subclass

    return decorator


def load_builtin_agent_loops() -> None:
    """Import the built-in loops (``single_turn_agent``, ``tool_agent``) so they register."""
    for module in BUILTIN_AGENT_LOOP_MODULES:
        importlib.import_module(module)


def read_agent_loop_config(path: str) -> dict[str, dict[str, Any]]:
    """``{name: {"_target_": ..., **kwargs}}`` from the YAML of ``rollout.agent.agent_loop_config_path``."""
    if not Path(path).is_file():
        raise ValueError(f"rollout.agent.agent_loop_config_path={path!r} is not a file")
    entries = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a list of {{name, _target_, ...}} entries")
    loops = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not entry.get("name") or not isinstance(entry.get("_target_"), str):
            raise ValueError(f"{path}: entry {index} needs 'name' and '_target_' (dotted path of an AgentLoopBase)")
        loops[entry["name"]] = {key: value for key, value in entry.items() if key != "name"}
    return loops


def register_agent_loop_config(path: str) -> list[str]:
    """Register the loops of an agent-loop YAML; returns their names."""
    loops = read_agent_loop_config(path)
    _agent_loop_registry.update(loops)
    return list(loops)


def resolve_class(target: str) -> type:
    """The class at dotted path ``target``."""
    module_name, _, attr = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"agent loop _target_ {target!r} cannot be imported: {exc}") from exc


def get_agent_loop_spec(agent_name: str) -> tuple[type, dict[str, Any]]:
    """``(class, extra constructor kwargs)`` of a registered loop; unknown names list the registered ones."""
    if agent_name not in _agent_loop_registry:
        load_builtin_agent_loops()
    if agent_name not in _agent_loop_registry:
        raise ValueError(
            f"agent loop {agent_name!r} is not registered (dataset column agent_name or "
            f"rollout.agent.default_agent_loop); registered: {sorted(_agent_loop_registry)}"
        )
    spec = dict(_agent_loop_registry[agent_name])
    cls = resolve_class(spec.pop("_target_"))
    if not (isinstance(cls, type) and issubclass(cls, AgentLoopBase)):
        raise ValueError(f"agent loop {agent_name!r}: {cls!r} is not a subclass of AgentLoopBase")
    return cls, spec


def registered_agent_loops() -> list[str]:
    """Names of the registered loops (built-ins included)."""
    load_builtin_agent_loops()
    return sorted(_agent_loop_registry)
