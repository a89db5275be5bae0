"""Every YAML file shipped in verl/, examples/ and recipe/ composes and validates.

Group options (``verl/trainer/config/<group>/<option>.yaml``) are composed by selecting them in the root
config; root configs by name; any other config YAML (one with a ``defaults`` list or a top-level key of
the PPO tree) as a primary config that builds on ``ppo_trainer``. A YAML that is not a config (e.g. a
SkyPilot launcher) has each ``verl.trainer.main_ppo`` command line it embeds composed and validated,
leaving out the overrides whose value is a shell variable. Tool and interaction files of multi-turn rollouts
(``tools:`` / ``interaction:`` lists) are checked by their loaders. Files are globbed at test time, so YAML added
later is covered too.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from verl.trainer.config import PPOConfig
from verl.trainer.config.loader import CONFIG_DIR, check_overrides, compose_config, compose_config_file
from verl.trainer.config.schema import ROOT_SCHEMA_CLASSES, schema_class
from verl.trainer.config.validation import check_typed, validate_config

REPO_ROOT = Path(__file__).resolve().parents[3]
SHIPPED_DIRS = ("verl", "examples", "recipe")


def _shipped_yaml_files() -> list[Path]:
    files = []
    for folder in SHIPPED_DIRS:
        files += [p for p in (REPO_ROOT / folder).rglob("*.y*ml") if p.suffix in (".yaml", ".yml")]
    return sorted(files)


def _package_for(group: str) -> str | None:
    """Where a group is mounted in ppo_trainer.yaml's defaults (``rollout`` -> ``actor_rollout_ref.rollout``)."""
    defaults = yaml.safe_load((CONFIG_DIR / "ppo_trainer.yaml").read_text())["defaults"]
    for entry in defaults:
        if isinstance(entry, dict):
            (key,) = entry
            name, _, package = key.partition("@")
            if name == group:
                return package or group
    return None


def _is_config(document: object) -> bool:
    top_keys = {f for f in PPOConfig.__dataclass_fields__}
    return isinstance(document, dict) and ("defaults" in document or bool(top_keys & set(document)))


def _embedded_command_lines(document: object) -> list[list[str]]:
    """Override lists of the ``verl.trainer.main_ppo`` invocations in the document's string values."""
    found: list[list[str]] = []
    if isinstance(document, dict):
        for value in document.values():
            found += _embedded_command_lines(value)
    elif isinstance(document, list):
        for value in document:
            found += _embedded_command_lines(value)
    elif isinstance(document, str):
        for line in document.replace("\\\n", " ").splitlines():
            if "verl.trainer.main_ppo" in line:
                tokens = shlex.split(line, comments=True)
                found.append(tokens[tokens.index("verl.trainer.main_ppo") + 1 :])
    return found


def _root_class(document: dict) -> type:
    """The dataclass a config builds on: its ``*_schema`` default (a recipe's, wherever it stands), or that of the
    root config it extends."""
    for entry in document.get("defaults", []):
        if isinstance(entry, str) and entry in ROOT_SCHEMA_CLASSES:
            return schema_class(entry)
    for entry in document.get("defaults", []):
        if isinstance(entry, str) and entry in ROOT_SCHEMA_CLASSES:
            return schema_class(entry)
        if isinstance(entry, str) and (CONFIG_DIR / f"{entry}.yaml").exists():
            return _root_class(yaml.safe_load((CONFIG_DIR / f"{entry}.yaml").read_text()))
    return PPOConfig


def _validate(cfg, cls: type) -> None:
    if issubclass(cls, PPOConfig):
        validate_config(cfg, schema=cls)
    else:
        check_typed(cfg, cls)


def _compose(path: Path):
    if path.parent == CONFIG_DIR:
        return compose_config([], config_name=path.stem)
    if path.parent.parent == CONFIG_DIR:
        group = path.parent.name
        package = _package_for(group)
        assert package is not None, f"{path}: group '{group}' is not in ppo_trainer.yaml's defaults list"
        selector = group if package == group else f"{group}@{package}"
        return compose_config([f"{selector}={path.stem}"])
    return compose_config_file(path)


def test_the_shipped_config_folder_is_found():
    names = {p.relative_to(REPO_ROOT).as_posix() for p in _shipped_yaml_files()}
    assert "verl/trainer/config/ppo_trainer.yaml" in names
    assert "verl/trainer/config/rollout/hf.yaml" in names


def _import_recipe(path: Path) -> None:
    """A recipe's YAML builds on the schema its package registers on import (``recipe/<name>/__init__.py``)."""
    import importlib

    relative = path.relative_to(REPO_ROOT)
    if relative.parts[0] == "recipe" and (REPO_ROOT / "recipe" / relative.parts[1] / "__init__.py").exists():
        importlib.import_module(f"recipe.{relative.parts[1]}")


def _check_multi_turn_file(path: Path, document: dict) -> None:
    from verl.interactions.utils.interaction_registry import initialize_interactions_from_config
    from verl.tools.utils.tool_registry import initialize_tools_from_config

    built = initialize_tools_from_config(str(path)) if "tools" in document else None
    built = built or initialize_interactions_from_config(str(path))
    assert built, f"{path} lists no tools or interactions"


@pytest.mark.parametrize("path", _shipped_yaml_files(), ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_shipped_yaml_composes_and_validates(path: Path):
    _import_recipe(path)
    document = yaml.safe_load(path.read_text())
    if isinstance(document, dict) and set(document) & {"tools", "interaction"}:
        _check_multi_turn_file(path, document)
        return
    if path.is_relative_to(CONFIG_DIR) or _is_config(document):
        root_class = _root_class(document) if isinstance(document, dict) else PPOConfig
        if path.parent.parent == CONFIG_DIR:
            root_class = PPOConfig  # group options are validated within ppo_trainer
        _validate(_compose(path), root_class)
        return
    command_lines = _embedded_command_lines(document)
    assert command_lines, f"{path} is neither a verl config nor a launcher of verl.trainer.main_ppo"
    for overrides in command_lines:
        check_overrides(overrides)
        validate_config(compose_config([o for o in overrides if "$" not in o.partition("=")[2]]))
