"""Composing the PPO config with Hydra and checking it before anything heavy starts.

- :func:`compose_config` builds the same ``DictConfig`` that ``@hydra.main(config_path="config",
  config_name="ppo_trainer")`` passes to ``verl.trainer.main_ppo`` (for tests, notebooks and scripts).
- :func:`compose_config_file` composes any YAML file that builds on ``ppo_trainer`` (examples, recipes).
- :func:`check_overrides` checks ``key=value`` command-line overrides against the schema *before* Hydra
  runs, so a misspelled key fails with the nearest valid key instead of Hydra's generic message.
- :func:`validate_config` (from :mod:`verl.trainer.config.validation`) checks a composed config and
  returns the typed :class:`PPOConfig`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.initialize import get_gh_backup, restore_gh_from_backup
from omegaconf import DictConfig

from verl.trainer.config.older_keys import rewrite_older_key
from verl.trainer.config.pins import CONFIG_NAME_PINS, RENAMED_KEYS, pinned_key
from verl.trainer.config.root import PPOConfig
from verl.trainer.config.schema import register_schemas
from verl.trainer.config.schema_walk import field_specs, is_config_class, is_free_mapping, nearest_keys, resolve_path
from verl.trainer.config.validation import ConfigError, validate_config

CONFIG_DIR = Path(__file__).resolve().parent
"""Folder of ``ppo_trainer.yaml`` and its group folders."""

__all__ = [
    "CONFIG_DIR",
    "ConfigError",
    "check_config_name",
    "check_overrides",
    "normalize_overrides",
    "compose_config",
    "compose_config_file",
    "config_groups",
    "load_config",
    "validate_config",
]


def config_groups() -> list[str]:
    """Names of the config groups (the sub-folders of ``CONFIG_DIR``), e.g. ``actor``, ``rollout``."""
    return sorted(p.name for p in CONFIG_DIR.iterdir() if p.is_dir() and any(p.glob("*.yaml")))


def _compose(config_dir: str, config_name: str, overrides: Sequence[str]) -> DictConfig:
    register_schemas()
    # A caller inside @hydra.main (or an earlier compose) holds the global Hydra instance: set it aside
    # for this composition and give it back afterwards.
    backup = get_gh_backup() if GlobalHydra.instance().is_initialized() else None
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            return compose(config_name=config_name, overrides=list(overrides))
    finally:
        if backup is not None:
            restore_gh_from_backup(backup)


def compose_config(overrides: Sequence[str] | None = None, config_name: str = "ppo_trainer") -> DictConfig:
    """Compose ``verl/trainer/config/<config_name>.yaml`` with Hydra command-line style ``overrides`` (normalised
    first, see :func:`normalize_overrides`)."""
    check_config_name(config_name)
    overrides = normalize_overrides(overrides or [])
    check_overrides(overrides)
    return _compose(str(CONFIG_DIR), config_name, overrides)


def compose_config_file(
    path: str | os.PathLike, overrides: Sequence[str] | None = None, schema: type = PPOConfig
) -> DictConfig:
    """Compose a YAML file outside the package that lists ``ppo_trainer`` (or a group option) in its defaults;
    ``overrides`` are normalised against ``schema`` (a recipe's tree for a recipe YAML).

    The file's folder comes first on the search path and this package's config folder second, as with
    ``python -m verl.trainer.main_ppo --config-path <folder> --config-name <file>`` plus
    ``hydra.searchpath=[pkg://verl.trainer.config]``.
    """
    path = Path(path).resolve()
    overrides = ["hydra.searchpath=[pkg://verl.trainer.config]", *normalize_overrides(overrides or [], schema)]
    return _compose(str(path.parent), path.stem, overrides)


def load_config(overrides: Sequence[str] | None = None, config_name: str = "ppo_trainer") -> PPOConfig:
    """Compose and validate: the typed config of ``python -m verl.trainer.main_ppo <overrides>``."""
    return validate_config(compose_config(overrides, config_name))


def _declared(path: str, schema: type = PPOConfig) -> bool:
    """Whether ``path`` is a field the schema declares itself (not a key below a free-form mapping)."""
    cls: Any = schema
    for part in path.split("."):
        specs = field_specs(cls) if is_config_class(cls) else {}
        if part not in specs:
            return False
        cls = specs[part][0]
    return True


def _is_mapping_field(path: str, schema: type = PPOConfig) -> bool:
    """Whether the declared field ``path`` is a free-form mapping (``dict[str, ...]``)."""
    cls: Any = schema
    for part in path.split("."):
        inner = field_specs(cls)[part][0]
        cls = inner
    return is_free_mapping(cls)


def _renamed(key: str, schema: type = PPOConfig) -> str:
    """``key`` with an older verl spelling of its last part replaced by the current one (when that one exists)."""
    parent, _, leaf = key.rpartition(".")
    if leaf in RENAMED_KEYS:
        current = f"{parent}.{RENAMED_KEYS[leaf]}" if parent else RENAMED_KEYS[leaf]
        if _declared(current, schema):
            return current
    return key


def normalize_overrides(overrides: Sequence[str], schema: type = PPOConfig) -> list[str]:
    """verl command lines as Hydra and the schema take them: ``+key=value`` / ``++key=value`` for a key the schema
    already declares become ``key=value`` (Hydra refuses to add an existing key; verl's schema lacked some), a key
    inside a free-form mapping (``rollout.engine_kwargs.vllm.swap_space``) gets ``++`` (add or override), and older
    key names (:data:`~verl.trainer.config.pins.RENAMED_KEYS`, e.g. ``model.use_rmpad``, and the moved or split keys
    of :mod:`verl.trainer.config.older_keys`, e.g. ``actor.kl_loss.coef``) become their current ones."""
    normalized = []
    for arg in overrides:
        if "=" not in arg or arg.startswith(("-", "~")):
            normalized.append(arg)
            continue
        key, _, value = arg.partition("=")
        prefix = "++" if key.startswith("++") else "+" if key.startswith("+") else ""
        written = key[len(prefix) :]
        current = rewrite_older_key(written, value, lambda path: _declared(path, schema))
        for bare, new_value in current if current is not None else [(_renamed(written, schema), value)]:
            normalized.append(_with_prefix(prefix, bare, schema) + f"{bare}={new_value}")
    return normalized


def _with_prefix(prefix: str, key: str, schema: type) -> str:
    """The Hydra prefix ``key`` needs: none for a declared key (Hydra cannot re-add it), ``++`` for a declared
    free-form mapping or a key inside one (add it, or override it), else what the user wrote."""
    if prefix and _declared(key, schema):
        return "++" if _is_mapping_field(key, schema) else ""
    if not prefix and not _declared(key, schema) and resolve_path(schema, key)[0]:
        return "++"  # a key inside a free-form mapping (engine_kwargs.vllm.x)
    return prefix


def check_config_name(config_name: str) -> None:
    """Fail for a verl ``--config-name`` whose feature is not built yet (``ppo_megatron_trainer``)."""
    name = Path(str(config_name)).stem
    if name in CONFIG_NAME_PINS:
        raise ConfigError([CONFIG_NAME_PINS[name].message(f"--config-name={config_name}")])


def check_overrides(overrides: Sequence[str], schema: type = PPOConfig) -> None:
    """Fail fast on ``key=value`` overrides whose key is not in ``schema`` (the PPO tree, or a recipe's extension
    of it), naming the nearest valid key.

    Flags (``--cfg``, ``-m``), ``hydra.*`` keys, group selections (``rollout@...=hf``, ``critic=...``),
    additions (``+key=value``) and deletions (``~key``) are left to Hydra and to :func:`validate_config`.
    Call this on ``sys.argv[1:]`` before ``@hydra.main`` runs.
    """
    groups = set(config_groups())
    errors = []
    for arg in overrides:
        if arg.startswith(("-", "~")) or "=" not in arg:
            continue
        if arg.startswith("+"):  # an added key: only pins are checked here, Hydra and validation do the rest
            key = arg.lstrip("+").split("=", 1)[0].strip()
            if pinned_key(key) is not None and not _declared(key, schema):
                prefix, pin = pinned_key(key)
                errors.append(pin.message(prefix))
            continue
        key = arg.split("=", 1)[0].strip()
        if "@" in key or "/" in key or key in groups or key.startswith("hydra.") or key == "hydra":
            continue
        if pinned_key(key) is not None and not _declared(key, schema):
            prefix, pin = pinned_key(key)
            errors.append(pin.message(prefix))
            continue
        known, parent, unknown, siblings = resolve_path(schema, key)
        if known:
            continue
        if not siblings:
            errors.append(f"'{key}': '{parent}' is a value, not a group of keys (it has no key '{unknown}')")
            continue
        near = nearest_keys(schema, parent, unknown, siblings)
        full = f"{parent}.{unknown}" if parent else unknown
        hint = f"did you mean {' or '.join(repr(n) for n in near)}?" if near else f"valid keys here: {siblings}"
        errors.append(f"unknown key '{full}' in override '{arg}'; {hint}")
    if errors:
        raise ConfigError(errors)
