"""Recipes extend the typed config tree with their own keys, without touching the shared dataclasses.

A recipe declares its keys as ordinary typed dataclasses (a docstring under every field) and states where they go::

    PrimeConfig = extend_config(
        PPOConfig,
        "PrimeConfig",
        {
            "data": PrimeDataConfig,  # a subclass of DataConfig: adds filter_accuracy, oversample_factor, ...
            "algorithm": PrimeAlgoConfig,  # a subclass of AlgoConfig: adds reward_dpo_coef, reward_gt_coef
            "actor_rollout_ref.hybrid_engine": (bool, choice_field(False, (False,))),  # one leaf, re-declared
        },
        checks=prime_config_errors,
    )

A group path names a dataclass that subclasses the field's current type (so code written for the base tree keeps
working) or a new top-level group (``rollout`` of the one-step off-policy recipe); a leaf path takes
``(type, dataclasses.field(...))``. Parents of a nested path become generated subclasses. The result validates,
composes and pickles like :class:`~verl.trainer.config.root.PPOConfig`; ``checks(config) -> list[str]`` adds the
recipe's cross-field errors to :func:`~verl.trainer.config.validation.validate_config`.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from collections.abc import Callable, Mapping
from typing import Any

from verl.trainer.config.schema_walk import field_specs, is_config_class

RECIPE_CHECKS_ATTR = "recipe_checks"
"""Class attribute holding a recipe's ``checks(config) -> list[str]`` (read by ``validate_config``)."""

RECIPE_OWNED_ATTR = "recipe_owned_sections"
"""Class attribute naming top-level sections a recipe gives its own meaning (PRIME's ``reward_model`` is its implicit
PRM, not the trainer's reward model): the shared checks of those sections are left to the recipe's ``checks``."""

__all__ = ["RECIPE_CHECKS_ATTR", "RECIPE_OWNED_ATTR", "extend_config", "recipe_errors"]


def _split(fields: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Direct entries (one key) and nested entries grouped by their first key."""
    direct: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for path, spec in fields.items():
        head, _, rest = path.partition(".")
        if not head:
            raise ValueError(f"extend_config: empty key in path {path!r}")
        if rest:
            nested.setdefault(head, {})[rest] = spec
        else:
            direct[head] = spec
    clash = sorted(set(direct) & set(nested))
    if clash:
        raise ValueError(f"extend_config: {clash} are given both as a whole group and key by key; give one")
    return direct, nested


def _group_field(name: str, cls: type, current: Any) -> tuple[str, type, dataclasses.Field]:
    if not is_config_class(cls):
        raise TypeError(f"extend_config: {name!r} must be a config dataclass or a (type, field) pair, got {cls!r}")
    if current is not None and is_config_class(current) and not issubclass(cls, current):
        raise TypeError(f"extend_config: {cls.__name__} for {name!r} must subclass {current.__name__}")
    return name, cls, dataclasses.field(default_factory=cls)


def extend_config(
    base: type,
    name: str,
    fields: Mapping[str, Any],
    checks: Callable[[Any], list[str]] | None = None,
    module: str | None = None,
    namespace: Mapping[str, Any] | None = None,
) -> type:
    """A subclass of the config dataclass ``base`` with ``fields`` added or re-declared (see the module docstring).

    ``name`` is the new class name (bind the result to that name in the calling module: pickle looks it up there);
    generated parent classes are named ``<name>_<key>``. ``module`` is the module
    the classes claim (default: the caller's), so tracebacks and ``repr`` point at the recipe. ``namespace`` adds
    class attributes that shared code reads from the config's class, e.g. the recipe's worker groups, pools and
    their default placement (``worker_groups``, ``recipe_pools``, ``recipe_roles`` of
    ``verl.trainer.ppo.placement``).
    """
    module = module or sys._getframe(1).f_globals.get("__name__", __name__)
    specs = field_specs(base)
    direct, nested = _split(fields)
    new_fields: list[tuple[str, type, dataclasses.Field]] = []
    for key, spec in direct.items():
        current = specs[key][0] if key in specs else None
        if isinstance(spec, tuple):
            annotation, field = spec
            if not isinstance(field, dataclasses.Field):
                raise TypeError(f"extend_config: {key!r} needs (type, dataclasses.field(...)), got {spec!r}")
            new_fields.append((key, annotation, field))
        else:
            new_fields.append(_group_field(key, spec, current))
    for key, sub_fields in nested.items():
        if key not in specs or not is_config_class(specs[key][0]):
            raise KeyError(f"extend_config: {base.__name__} has no config group {key!r} to extend")
        sub_cls = extend_config(specs[key][0], f"{name}_{key}", sub_fields, module=module)
        new_fields.append(_group_field(key, sub_cls, specs[key][0]))
    attributes = {key: staticmethod(value) if callable(value) else value for key, value in (namespace or {}).items()}
    if checks is not None:
        attributes[RECIPE_CHECKS_ATTR] = staticmethod(checks)
    cls = dataclasses.make_dataclass(name, new_fields, bases=(base,), namespace=attributes)
    cls.__module__ = module
    _check_resolvable(cls)
    # Bind the class under its name in the claiming module, so pickle finds it by reference (the caller's
    # ``Name = extend_config(..., "Name", ...)`` binds the same object; generated parents get theirs here).
    owner = sys.modules.get(module)
    if owner is not None and getattr(owner, name, cls) is cls:
        setattr(owner, name, cls)
    return cls


def _check_resolvable(cls: type) -> None:
    """Fail at definition time (not at first validation) when an annotation cannot be resolved."""
    try:
        typing.get_type_hints(cls)
    except NameError as exc:
        raise TypeError(f"extend_config: an annotation of {cls.__name__} does not resolve: {exc}") from exc


def recipe_errors(config: Any) -> list[str]:
    """The recipe's own cross-field errors of ``config`` (empty for the plain PPO tree)."""
    checks = getattr(type(config), RECIPE_CHECKS_ATTR, None)
    return list(checks(config)) if checks is not None else []
