"""Shared base of the typed configs: dict-style reads and field metadata for validation.

Every config is a plain dataclass whose fields carry a docstring (a string literal right under the
field). ``choices`` and ``bounds`` metadata tell :func:`verl.trainer.config.validation.validate_config`
which values are allowed, so the allowed set is written once, next to the default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BaseConfig:
    """Base of every typed config: attribute access plus ``cfg.get(key, default)`` and ``cfg[key]``.

    The dict-style reads let code written for a ``DictConfig`` keep working on the typed object.
    """

    def get(self, key: str, default: Any = None) -> Any:
        """Return the field ``key``, or ``default`` when the config has no such field."""
        return getattr(self, key, default)

    def __getitem__(self, key: str) -> Any:
        if not isinstance(key, str) or key not in self._field_names():
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._field_names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._field_names())

    def __len__(self) -> int:
        return len(self._field_names())

    def keys(self) -> list[str]:
        """Field names, in declaration order."""
        return list(self._field_names())

    def to_dict(self) -> dict[str, Any]:
        """A plain nested dict of the config (dataclasses turned into dicts)."""
        return dataclasses.asdict(self)

    @classmethod
    def _field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


def choice_field(default: Any, choices: tuple[Any, ...]) -> Any:
    """A field whose value must be one of ``choices`` (``None`` passes when the default is ``None``)."""
    return field(default=default, metadata={"choices": tuple(choices)})


def pinned_field(default: Any, supported: tuple[Any, ...], feature: str, issue: int) -> Any:
    """A field whose other values belong to a feature being built elsewhere: any value outside ``supported`` fails
    validation with "not supported yet: <feature> (issue N)"."""
    return field(default=default, metadata={"pin": {"supported": tuple(supported), "feature": feature, "issue": issue}})


def registry_field(default: Any, registry: str) -> Any:
    """A field naming an entry of a :class:`verl.utils.registry.Registry` (``"module:ATTRIBUTE"``, imported lazily);
    validation checks the value (each item of a list) against the registry, so the allowed set is whatever is
    registered, built in or by user code."""
    kwargs = {"default_factory": default} if callable(default) else {"default": default}
    return field(metadata={"registry": registry}, **kwargs)


def resolve_registry(spec: str) -> Any:
    """The registry object named by a ``registry_field``'s ``"module:ATTRIBUTE"``."""
    import importlib

    module, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module), attribute)


def bounded_field(default: Any, *, ge: float | None = None, gt: float | None = None, le: float | None = None) -> Any:
    """A numeric field with inclusive lower ``ge``, exclusive lower ``gt`` and inclusive upper ``le`` bounds.

    ``None`` always passes (it means "unset" for the optional fields that use these bounds).
    """
    return field(default=default, metadata={"bounds": {"ge": ge, "gt": gt, "le": le}})
