"""One registry type for every name-selected component: estimators, losses, reward managers, rollouts, engines,
loggers and model mergers.

A :class:`Registry` maps a name from the config to a class or function. Built-in entries register themselves with
a decorator in their own module; the registry finds them without importing anything by reading its package's
source (``ast``), so config validation can check a name in milliseconds and only :meth:`Registry.get` imports the
one module that registers it. Names registered at run time by user code count as well.

A name may be *pinned*: a feature that is planned but not built yet. Looking it up fails with
"not supported yet: <feature> (issue N)"; a later registration of the same name replaces the pin.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_MISSING = object()

__all__ = ["Pin", "Registry", "StaticEntry"]


@dataclass(frozen=True)
class Pin:
    """A planned feature that does not exist yet, and the issue that builds it."""

    feature: str
    """What the user asked for, in words (e.g. ``the Megatron training engine``)."""

    issue: int
    """Issue number of the work that builds it."""

    def message(self, what: str) -> str:
        """``<what>: not supported yet: <feature> (issue N)``."""
        return f"{what}: not supported yet: {self.feature} (issue {self.issue})"


@dataclass(frozen=True)
class StaticEntry:
    """A registration found in source: where it is and what it declares."""

    module: str
    """Dotted module whose import registers the name."""

    params: tuple[str, ...] | None
    """Parameter names of a registered function (``**kwargs`` excluded); None for a class or unknown callable."""

    info: dict[str, Any] = field(default_factory=dict)
    """Constant keyword arguments of the registering call (e.g. ``requires="wandb"``)."""


def _package_files(package: str) -> list[tuple[str, Path]]:
    """``(dotted module, file)`` of ``package`` (a package: all its modules; a module: itself); [] if absent."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        root = Path(list(spec.submodule_search_locations)[0])
        files = []
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files.append((".".join([package, *parts]), path))
        return files
    return [(package, Path(spec.origin))] if spec.origin else []


def _string_enums(trees: list[ast.Module]) -> dict[tuple[str, str], str]:
    """``(class, member) -> value`` of string-valued class attributes (``AdvantageEstimator.GRPO``)."""
    values = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if (
                        isinstance(stmt, ast.Assign)
                        and isinstance(stmt.targets[0], ast.Name)
                        and isinstance(stmt.value, ast.Constant)
                        and isinstance(stmt.value.value, str)
                    ):
                        values[(node.name, stmt.targets[0].id)] = stmt.value.value
    return values


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _name_argument(arg: ast.expr, enums: dict[tuple[str, str], str]) -> str | None:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name):
        return enums.get((arg.value.id, arg.attr))
    return None


def _params(node: ast.AST | None) -> tuple[str, ...] | None:
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    args = node.args
    return tuple(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])


def _registrations(tree: ast.Module, decorator: str, enums: dict) -> list[tuple[str, ast.AST | None, dict]]:
    """``(name, decorated node or None, constant keywords)`` of every ``decorator("name", ...)`` call in ``tree``."""
    found = []
    decorated = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for deco in node.decorator_list:
                decorated[id(deco)] = node
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _called_name(node) == decorator and node.args):
            continue
        name = _name_argument(node.args[0], enums)
        if name is None:
            continue
        info = {kw.arg: kw.value.value for kw in node.keywords if kw.arg and isinstance(kw.value, ast.Constant)}
        found.append((name, decorated.get(id(node)), info))
    return found


@functools.cache
def scan_source(package: str, decorator: str) -> dict[str, StaticEntry]:
    """Registrations ``decorator("name", ...)`` found in the source of ``package``, without importing it."""
    files = _package_files(package)
    trees = [(module, ast.parse(path.read_text(encoding="utf-8"))) for module, path in files]
    enums = _string_enums([tree for _, tree in trees])
    entries = {}
    for module, tree in trees:
        for name, node, info in _registrations(tree, decorator, enums):
            entries[name] = StaticEntry(module=module, params=_params(node), info=info)
    return entries


def _key(name: str | Enum) -> str:
    return name.value if isinstance(name, Enum) else str(name)


class Registry(Mapping[str, T], Generic[T]):
    """Name -> component, the only dispatch path for one kind of component.

    ``package``/``decorator`` say where the built-in registrations live (``decorator("name", ...)`` calls in
    the package's source); ``config_key`` names the config key that selects an entry, for error messages.
    A mapping: ``registry[name]``, ``name in registry`` (no import), ``sorted(registry)`` (imports all).
    """

    def __init__(self, kind: str, config_key: str, package: str, decorator: str = "register"):
        self.kind = kind
        self.config_key = config_key
        self.package = package
        self.decorator = decorator
        self._entries: dict[str, T] = {}
        self._info: dict[str, dict[str, Any]] = {}
        self._pins: dict[str, Pin] = {}

    # ------------------------------------------------------------------ registering
    def register(self, name: str | Enum, **info: Any) -> Callable[[T], T]:
        """Decorator adding ``obj`` under ``name`` with metadata ``info``; a different object under a taken name
        fails (the same function re-registered by a module reload is accepted)."""
        key = _key(name)

        def decorate(obj: T) -> T:
            existing = self._entries.get(key)
            if existing is not None and existing is not obj and _origin(existing) != _origin(obj):
                raise ValueError(
                    f"{self.kind} {key!r} is already registered by {_origin(existing)}; choose another name for "
                    f"{_origin(obj)}"
                )
            self._entries[key] = obj
            self._info[key] = dict(info)
            return obj

        return decorate

    def pin(self, name: str, feature: str, issue: int) -> None:
        """Reserve ``name`` for a feature that is not built yet: looking it up names the feature and the issue."""
        self._pins[name] = Pin(feature, issue)

    # ------------------------------------------------------------------ looking up
    def static_entries(self) -> dict[str, StaticEntry]:
        """The built-in registrations found in source (no import)."""
        return scan_source(self.package, self.decorator)

    def pins(self) -> dict[str, Pin]:
        """Every pinned name that nothing registers yet, with its pin."""
        return {name: pin for name, pin in sorted(self._pins.items()) if self.pinned(name) is not None}

    def pinned(self, name: str | Enum) -> Pin | None:
        """The pin of ``name`` when it is pinned and nothing registers it."""
        key = _key(name)
        if key in self._entries or key in self.static_entries():
            return None
        return self._pins.get(key)

    def names(self) -> list[str]:
        """Every available name, built-in and registered at run time (no import)."""
        return sorted(set(self._entries) | set(self.static_entries()))

    def __contains__(self, name: object) -> bool:
        key = _key(name) if isinstance(name, str | Enum) else None
        return key is not None and (key in self._entries or key in self.static_entries())

    def error(self, name: str | Enum, key: str | None = None) -> str | None:
        """Why ``name`` cannot be used (pinned, or unknown listing the names), or None when it can; the message
        names the config ``key`` (default: :attr:`config_key`)."""
        setting = f"{key or self.config_key}={_key(name)!r}"
        pin = self.pinned(name)
        if pin is not None:
            return pin.message(setting)
        if name in self:
            return None
        return f"{setting} is not a registered {self.kind}; registered: {', '.join(self.names())}"

    def get(self, name: str | Enum, default: Any = _MISSING) -> T:
        """The entry registered as ``name``, importing the module that registers it on first use.

        An unknown or pinned name fails naming the registered ones (or the pin), unless ``default`` is given
        (``dict.get`` style)."""
        key = _key(name)
        if default is not _MISSING and key not in self._entries and key not in self.static_entries():
            return default
        if key not in self._entries and key in self.static_entries():
            importlib.import_module(self.static_entries()[key].module)
        if key not in self._entries:
            pin = self.pinned(key)
            if pin is not None:
                raise NotImplementedError(pin.message(f"{self.config_key}={key!r}"))
            raise ValueError(
                f"Unknown {self.kind} {key!r} ({self.config_key}); registered: {self.names()}"
                f". Add one with @{self.decorator}(name)."
            )
        return self._entries[key]

    def info(self, name: str | Enum) -> dict[str, Any]:
        """Metadata given at registration (no import for built-ins)."""
        key = _key(name)
        if key in self._entries:
            return dict(self._info.get(key, {}))
        entry = self.static_entries().get(key)
        return dict(entry.info) if entry is not None else {}

    def params(self, name: str | Enum) -> frozenset[str] | None:
        """Parameter names of the registered function (``**kwargs`` excluded); None for a class (no import for
        built-ins)."""
        key = _key(name)
        if key in self._entries:
            obj = self._entries[key]
            if inspect.isclass(obj):
                return None
            parameters = inspect.signature(obj).parameters.values()
            return frozenset(p.name for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD)
        entry = self.static_entries().get(key)
        return frozenset(entry.params) if entry is not None and entry.params is not None else None

    def pop(self, name: str | Enum, default: Any = None) -> T | None:
        """Remove a run-time registration (and its metadata); returns it, or ``default`` when absent."""
        key = _key(name)
        self._info.pop(key, None)
        return self._entries.pop(key, default)

    def load_all(self) -> None:
        """Import every module that registers a built-in entry."""
        for module in sorted({entry.module for entry in self.static_entries().values()}):
            importlib.import_module(module)

    # ------------------------------------------------------------------ mapping interface
    def __getitem__(self, name: str) -> T:
        try:
            return self.get(name)
        except (ValueError, NotImplementedError) as exc:
            raise KeyError(str(exc)) from None

    def __iter__(self) -> Iterator[str]:
        self.load_all()
        return iter(sorted(self._entries))

    def __len__(self) -> int:
        self.load_all()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, names={self.names()})"


def _origin(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"
