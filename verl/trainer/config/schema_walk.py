"""Reading the dataclass schema: field types, metadata, and every valid key path (for "did you mean")."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import types
import typing
from typing import Any, Union

NONE_TYPE = type(None)


def unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    """``(inner type, is optional)`` of ``X | None`` / ``Optional[X]``; other annotations pass through."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not NONE_TYPE]
        optional = len(args) < len(typing.get_args(annotation))
        return (args[0] if len(args) == 1 else Any), optional
    return annotation, False


@functools.cache
def field_specs(cls: type) -> dict[str, tuple[Any, bool, dict]]:
    """``{field name: (inner type, optional, metadata)}`` of a config dataclass, in declaration order."""
    hints = typing.get_type_hints(cls)
    specs = {}
    for f in dataclasses.fields(cls):
        inner, optional = unwrap_optional(hints[f.name])
        specs[f.name] = (inner, optional, dict(f.metadata))
    return specs


def is_config_class(annotation: Any) -> bool:
    """True for a nested config dataclass (a subtree), false for a leaf type."""
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def is_free_mapping(annotation: Any) -> bool:
    """True for ``dict[...]``/``Any`` fields, whose sub-keys are free-form (passed on as keyword arguments)."""
    return annotation is Any or annotation is dict or typing.get_origin(annotation) is dict


@functools.cache
def all_key_paths(cls: type, prefix: str = "") -> tuple[str, ...]:
    """Every key path under ``cls`` (subtrees included), e.g. ``actor_rollout_ref.rollout.val_kwargs.n``."""
    paths: list[str] = []
    for name, (inner, _, _) in field_specs(cls).items():
        path = f"{prefix}{name}"
        paths.append(path)
        if is_config_class(inner):
            paths.extend(all_key_paths(inner, path + "."))
    return tuple(paths)


def nearest_keys(root: type, parent_path: str, key: str, siblings: list[str]) -> list[str]:
    """Valid key paths closest to the unknown ``parent_path.key``: a similar sibling first, then the same
    (or a similar) name elsewhere in the tree, then the closest full path."""
    prefix = f"{parent_path}." if parent_path else ""
    close = difflib.get_close_matches(key, siblings, n=1, cutoff=0.6)
    if close:
        return [prefix + close[0]]
    paths = all_key_paths(root)
    same_leaf = [p for p in paths if p.rsplit(".", 1)[-1] == key]
    if same_leaf:
        return same_leaf[:3]
    close_path = difflib.get_close_matches(prefix + key, paths, n=1, cutoff=0.75)
    if close_path:
        return close_path
    leaves = sorted({p.rsplit(".", 1)[-1] for p in paths})
    close_leaf = difflib.get_close_matches(key, leaves, n=1, cutoff=0.7)
    if close_leaf:
        return [p for p in paths if p.rsplit(".", 1)[-1] == close_leaf[0]][:3]
    return []


def resolve_path(root: type, path: str) -> tuple[bool, str, str, list[str]]:
    """Walk ``path`` through the schema: ``(known, deepest valid parent path, first unknown key, its siblings)``.

    Keys below a free-form mapping field are always known.
    """
    cls: Any = root
    parts = path.split(".")
    for depth, part in enumerate(parts):
        specs = field_specs(cls)
        if part not in specs:
            return False, ".".join(parts[:depth]), part, list(specs)
        inner = specs[part][0]
        if is_free_mapping(inner):
            return True, "", "", []
        if not is_config_class(inner):
            known = depth == len(parts) - 1
            return known, ".".join(parts[: depth + 1]), ".".join(parts[depth + 1 :]), []
        cls = inner
    return True, "", "", []


def leaf_fields(cls: type, prefix: str = "") -> list[tuple[str, dict]]:
    """``(key path, metadata)`` of every leaf (non-group) field under ``cls``."""
    leaves: list[tuple[str, dict]] = []
    for name, (inner, _, metadata) in field_specs(cls).items():
        path = f"{prefix}{name}"
        if is_config_class(inner):
            leaves.extend(leaf_fields(inner, path + "."))
        else:
            leaves.append((path, metadata))
    return leaves


def _names_read(path) -> set[str]:
    """Attribute names read (``x.name``) and string constants (``getattr(x, "name")``, ``d["name"]``) in a file."""
    import ast

    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)
    return names


def unread_fields(root: type, package_dir, definition_files: set) -> list[str]:
    """Leaf key paths under ``root`` that no code of ``package_dir`` reads by name (outside the files that only
    declare the config dataclasses), that are not pinned to a planned feature and that can take more than one
    value: the keys a user could set and see nothing happen."""
    from pathlib import Path

    read: set[str] = set()
    for path in Path(package_dir).rglob("*.py"):
        if path.resolve() not in definition_files:
            read |= _names_read(path)
    unread = []
    for path, metadata in leaf_fields(root):
        constant = len(metadata.get("choices", ())) == 1
        if path.rsplit(".", 1)[-1] not in read and "pin" not in metadata and not constant:
            unread.append(path)
    return unread
