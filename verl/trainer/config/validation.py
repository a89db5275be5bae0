"""Startup validation of a composed config: keys, types, ranges, then cross-field and registry checks.

Runs before Ray starts or any model loads and imports nothing heavy except the algorithm and reward
registries (to list registered names). Every problem found is reported at once, each naming its key.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from verl.trainer.config.pins import pinned_key
from verl.trainer.config.root import PPOConfig
from verl.trainer.config.schema_walk import field_specs, is_config_class, is_free_mapping, nearest_keys
from verl.utils.registry import Pin

_REFERENCE = re.compile(r"^\$\{([\w.]+)\}$")

IGNORED_KEYS = ("_target_",)
"""Keys accepted anywhere and dropped (verl's YAML files carry ``_target_`` class paths)."""


class ConfigError(ValueError):
    """An invalid config; ``errors`` holds one message per problem, each naming the key(s) and the fix."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        super().__init__("Invalid config:\n" + "\n".join(f"  - {e}" for e in self.errors))


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _unknown_key_errors(node: Any, cls: type, path: str, root: type, errors: list[str]) -> None:
    """Report keys of ``node`` that ``cls`` does not define, with the nearest valid key."""
    if not isinstance(node, DictConfig | dict):
        return
    specs = field_specs(cls)
    for key in node.keys():
        key = str(key)
        if key in IGNORED_KEYS or (not path and key == "hydra"):
            continue
        full = _join(path, key)
        if key not in specs and pinned_key(full) is not None:
            prefix, pin = pinned_key(full)
            errors.append(pin.message(prefix))
            continue
        if key not in specs:
            near = nearest_keys(root, path, key, list(specs))
            hint = f"did you mean {' or '.join(repr(n) for n in near)}?" if near else f"valid keys here: {list(specs)}"
            errors.append(f"unknown key '{full}'; {hint}")
            continue
        inner = specs[key][0]
        if is_config_class(inner):
            child = node._get_node(key) if isinstance(node, DictConfig) else node[key]
            if isinstance(child, DictConfig) and child._is_none():
                continue
            _unknown_key_errors(node[key], inner, full, root, errors)


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", str(annotation))


def _check_leaf(value: Any, annotation: Any, path: str, errors: list[str]) -> Any:
    """Check (and lightly coerce) one leaf value against its annotation; return the value to keep."""
    if annotation is Any or annotation is object:
        return value
    origin = typing.get_origin(annotation)
    if origin is dict or annotation is dict:
        if not isinstance(value, dict):
            errors.append(f"{path}={value!r} must be a mapping (key: value pairs)")
        return value
    if origin is list or annotation is list:
        item_type = (typing.get_args(annotation) or (Any,))[0]
        if isinstance(value, str) and item_type is str:
            value = [value]
        if not isinstance(value, list | tuple):
            errors.append(f"{path}={value!r} must be a list of {_type_name(item_type)}")
            return value
        return [_check_leaf(v, item_type, f"{path}[{i}]", errors) for i, v in enumerate(value)]
    if annotation is bool:
        if not isinstance(value, bool):
            errors.append(f"{path}={value!r} must be a boolean (true or false)")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(f"{path}={value!r} must be an integer")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            errors.append(f"{path}={value!r} must be a number")
            return value
        return float(value)
    if annotation is str:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            errors.append(f"{path}={value!r} must be a string")
            return value
        return str(value)
    return value


def _check_metadata(value: Any, metadata: dict, path: str, errors: list[str]) -> None:
    pin = metadata.get("pin")
    if pin is not None and value not in pin["supported"]:
        errors.append(Pin(pin["feature"], pin["issue"]).message(f"{path}={value!r}"))
    choices = metadata.get("choices")
    if choices is not None and value not in choices:
        shown = ", ".join("null" if c is None else str(c).lower() if isinstance(c, bool) else str(c) for c in choices)
        errors.append(f"{path}={value!r} is not allowed; allowed values: {shown}")
    bounds = metadata.get("bounds")
    if bounds and value is not None and isinstance(value, int | float) and not isinstance(value, bool):
        ge, gt, le = bounds["ge"], bounds["gt"], bounds["le"]
        if (ge is not None and value < ge) or (gt is not None and value <= gt) or (le is not None and value > le):
            low = f">= {ge}" if ge is not None else f"> {gt}" if gt is not None else ""
            high = f"<= {le}" if le is not None else ""
            errors.append(f"{path}={value!r} is out of range; allowed: {' and '.join(p for p in (low, high) if p)}")


def _single_reference(raw: Any, key: str) -> str | None:
    """The key path that ``raw[key]`` copies when its value is exactly ``${path}``, else None."""
    if not isinstance(raw, DictConfig):
        return None
    node = raw._get_node(key)
    value = node._value() if node is not None else None
    match = _REFERENCE.match(value) if isinstance(value, str) else None
    return match.group(1) if match else None


def _reported(errors: list[str], path: str) -> bool:
    return any(e.startswith((f"{path}=", f"{path} ")) for e in errors)


def _check_types(node: Any, cls: type, path: str, errors: list[str], raw: Any = None) -> dict:
    """Type- and range-check a resolved mapping against ``cls``; return it with light coercions applied.

    ``raw`` is the same node before resolution: a value that only copies another key (``${other.key}``)
    whose problem is already reported is not reported a second time.
    """
    checked: dict[str, Any] = {}
    specs = field_specs(cls)
    for key, value in node.items():
        if key not in specs:
            continue  # already reported as unknown (or ignored)
        inner, optional, metadata = specs[key]
        full = _join(path, key)
        before = len(errors)
        if value is None:
            if not optional and not is_free_mapping(inner) and "choices" not in metadata:
                errors.append(f"{full} must not be null (expected {_type_name(inner)})")
            elif "choices" in metadata and None not in metadata["choices"]:
                _check_metadata(value, metadata, full, errors)
            checked[key] = None
        elif is_config_class(inner):
            if not isinstance(value, dict):
                errors.append(f"{full}={value!r} must be a mapping of the {inner.__name__} keys")
                continue
            sub_raw = raw[key] if isinstance(raw, DictConfig) and key in raw else None
            checked[key] = _check_types(value, inner, full, errors, sub_raw)
            continue
        else:
            checked[key] = _check_leaf(value, inner, full, errors)
            _check_metadata(checked[key], metadata, full, errors)
        source = _single_reference(raw, key)
        if len(errors) > before and source is not None and _reported(errors[:before], source):
            del errors[before:]
    return checked


def _strip_ignored(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_ignored(v) for k, v in node.items() if k not in IGNORED_KEYS and k != "hydra"}
    return node


def _resolve(cfg: DictConfig) -> dict:
    """Resolve interpolations, turning a failure into an error that names the key and the reference."""
    try:
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "?"
        raise ConfigError(
            [f"{key}: cannot resolve its interpolation ({exc.msg if hasattr(exc, 'msg') else exc})"]
        ) from None


def to_typed(container: dict, cls: type, base: Any = None) -> Any:
    """Build the dataclass tree from a type-checked container.

    Missing keys keep the values of ``base`` (default: ``cls()``), so a partial mapping for a nested
    config such as ``val_kwargs`` starts from that field's own defaults.
    """
    base = cls() if base is None else base
    updates = {}
    for key, (inner, _, _) in field_specs(cls).items():
        if key not in container:
            continue
        value = container[key]
        if is_config_class(inner) and isinstance(value, dict):
            value = to_typed(value, inner, getattr(base, key))
        updates[key] = value
    return dataclasses.replace(base, **updates)


def check_typed(cfg: DictConfig | dict, cls: type, prefix: str = "") -> Any:
    """Check a composed config against the dataclass ``cls`` and return the typed object.

    Raises :class:`ConfigError` listing every unknown key (with the nearest valid key), wrong type, and
    disallowed or out-of-range value (with the allowed values). Usable for any root config class; ``prefix``
    is the config's own key path (e.g. ``data``), used in the messages.
    """
    if isinstance(cfg, dict):
        cfg = OmegaConf.create(cfg)
    if not isinstance(cfg, DictConfig):
        raise TypeError(f"expected a DictConfig, dict or {cls.__name__}, got {type(cfg).__name__}")
    errors: list[str] = []
    _unknown_key_errors(cfg, cls, prefix, cls, errors)
    if errors:
        raise ConfigError(errors)
    container = _strip_ignored(_resolve(cfg))
    checked = _check_types(container, cls, prefix, errors, cfg)
    if errors:
        raise ConfigError(errors)
    return to_typed(checked, cls)


def validate_config(
    cfg: DictConfig | dict | PPOConfig, *, check_registries: bool = True, schema: type = PPOConfig
) -> PPOConfig:
    """Check a composed PPO config and return it as a typed :class:`PPOConfig` (or as ``schema``, a recipe's
    extension of it made by :func:`verl.trainer.config.extend.extend_config`).

    Raises :class:`ConfigError` listing every problem: unknown keys (with the nearest valid key), wrong
    types and out-of-range or disallowed values (with the allowed values), cross-field inconsistencies
    (naming every key involved and the fix; a recipe adds its own), and names missing from the
    advantage-estimator, policy-loss and reward-manager registries (listing the registered ones).
    """
    from verl.trainer.config.checks import cross_field_errors, registry_errors
    from verl.trainer.config.deprecated import apply_deprecated_micro_batch_sizes
    from verl.trainer.config.extend import recipe_errors

    typed = cfg if isinstance(cfg, schema) else check_typed(cfg, schema)
    errors = apply_deprecated_micro_batch_sizes(typed)
    if errors:
        raise ConfigError(errors)
    errors = cross_field_errors(typed) + recipe_errors(typed)
    if check_registries:
        errors += registry_errors(typed)
    if errors:
        raise ConfigError(errors)
    return typed


__all__ = ["ConfigError", "check_typed", "to_typed", "validate_config"]
