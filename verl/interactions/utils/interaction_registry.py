"""Build the interactions of a run from the YAML of ``rollout.multi_turn.interaction_config_path``::

    interaction:
      - name: gsm8k                                   # rows pick it with interaction_kwargs.name
        class_name: verl.interactions.gsm8k_interaction.Gsm8kInteraction
        config: {}

The name defaults to ``config.name`` and then to the class's default; names must be unique.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from verl.interactions.base import BaseInteraction
from verl.tools.utils.tool_registry import get_tool_class


def load_interaction_specs(path: str) -> list[dict[str, Any]]:
    """Read and check the interaction YAML at ``path``: ``[{name, class_name, config}]`` with unique names."""
    if not Path(path).is_file():
        raise ValueError(f"rollout.multi_turn.interaction_config_path={path!r} is not a file")
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    entries = raw.get("interaction") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a top-level 'interaction:' list of {{name, class_name, config}} entries")
    specs, names = [], []
    for index, entry in enumerate(entries):
        where = f"{path}: interaction[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("class_name"), str):
            raise ValueError(f"{where} needs a 'class_name' (dotted path of a BaseInteraction subclass)")
        unknown = sorted(set(entry) - {"name", "class_name", "config"})
        if unknown:
            raise ValueError(f"{where} has unknown keys {unknown}; allowed: name, class_name, config")
        config = dict(entry.get("config") or {})
        name = entry.get("name") or config.get("name")
        if not name:
            raise ValueError(f"{where} needs a 'name' (rows select the interaction with interaction_kwargs.name)")
        config.setdefault("name", name)
        names.append(name)
        specs.append({"name": name, "class_name": entry["class_name"], "config": config})
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{path}: interaction names {duplicates} appear more than once")
    return specs


def check_interaction_classes(specs: list[dict[str, Any]], path: str) -> None:
    """Every ``class_name`` imports and is a :class:`BaseInteraction`."""
    for spec in specs:
        cls = get_tool_class(spec["class_name"])
        if not (isinstance(cls, type) and issubclass(cls, BaseInteraction)):
            raise ValueError(
                f"{path}: {spec['class_name']} is not a subclass of verl.interactions.base.BaseInteraction"
            )


def initialize_interactions_from_config(interaction_config_file: str) -> dict[str, BaseInteraction]:
    """``{name: interaction}`` for the entries of ``interaction_config_file``."""
    specs = load_interaction_specs(interaction_config_file)
    check_interaction_classes(specs, interaction_config_file)
    return {spec["name"]: get_tool_class(spec["class_name"])(config=spec["config"]) for spec in specs}
