"""Names registered in the algorithm and reward-manager registries, read from source without importing it.

Importing the registries pulls in torch (seconds); reading their decorators with ``ast`` takes a few
milliseconds. :func:`verl.trainer.config.checks.registry_errors` accepts a name found here; a name that is
not found is looked up in the live registry (importing it), so registrations made at run time by user
code still count and the error lists the live registry's names.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

REGISTRIES = {
    "adv_estimator": ("verl.trainer.ppo.algos", "register_adv_est"),
    "policy_loss": ("verl.trainer.ppo.algos", "register_policy_loss"),
    "reward_manager": ("verl.workers.reward_manager", "register"),
    "rollout": ("verl.workers.rollout", "register_rollout"),
}
"""Registry -> (package whose source is scanned, decorator name)."""

ENUM_MODULE_FILE = ("verl.trainer.ppo.algos", "registry.py", "AdvantageEstimator")
"""Where the ``AdvantageEstimator`` enum (used as decorator argument) is defined."""


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


@functools.cache
def _enum_values() -> dict[str, str]:
    package, filename, enum_name = ENUM_MODULE_FILE
    folder = _package_dir(package)
    if folder is None or not (folder / filename).exists():
        return {}
    tree = ast.parse((folder / filename).read_text(encoding="utf-8"))
    values = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == enum_name:
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(stmt.value, ast.Constant)
                ):
                    values[stmt.targets[0].id] = stmt.value.value
    return values


def _decorator_name(call: ast.Call, decorator: str) -> str | None:
    func = call.func
    called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if called != decorator or len(call.args) != 1 or call.keywords:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.Attribute):
        return _enum_values().get(arg.attr)
    return None


@functools.cache
def static_names(registry: str) -> frozenset[str] | None:
    """Names the source registers in ``registry`` (see :data:`REGISTRIES`); None when the package is absent."""
    package, decorator = REGISTRIES[registry]
    folder = _package_dir(package)
    if folder is None:
        return None
    names = set()
    for path in folder.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                for deco in node.decorator_list:
                    if isinstance(deco, ast.Call) and (name := _decorator_name(deco, decorator)) is not None:
                        names.add(name)
    return frozenset(names)
