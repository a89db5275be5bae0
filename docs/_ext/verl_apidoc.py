"""Writes the API reference pages (``api/generated/<module>.rst``) when a Sphinx build starts.

The packages to document are the entries of the toctree in ``api/index.md`` (``generated/verl.trainer`` and so on);
every public module below them (no path part starting with ``_``) gets a page, so a new module appears without
editing anything. A page documents, through autodoc, the names the module defines itself (those in ``__all__`` when
it has one). A name it only re-exports (``core_algos`` re-exports the algorithm modules, package ``__init__`` files
re-export their classes) gets a short alias entry linking to the page that documents it, so no object is described
twice and a reference by either name resolves;
a re-export whose defining module has no page (a private module) is documented in place.

A package that cannot be imported is reported as a Sphinx warning, which ``-W`` turns into a failed build.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

INDEX = "api/index.md"
OUT_DIR = "api/generated"
_ROOT_ENTRY = re.compile(r"^\s*generated/(verl(?:\.\w+)*)\s*$", re.MULTILINE)


@dataclass
class ModulePage:
    """What one module's page shows."""

    name: str
    exported: list[str] = field(default_factory=list)
    """The module's public names: ``__all__`` when it has one, else the names its source binds at top level."""
    bound: dict[str, str] = field(default_factory=dict)
    """Names the module's source binds at top level (def, class, assignment) -> the docstring under an assignment."""
    submodules: list[str] = field(default_factory=list)


def root_packages(index_text: str) -> list[str]:
    """The dotted names listed as ``generated/<name>`` toctree entries of ``api/index.md``."""
    return _ROOT_ENTRY.findall(index_text)


def _is_public(dotted: str) -> bool:
    return not any(part.startswith("_") for part in dotted.split("."))


def _string_after(body: list[ast.stmt], index: int) -> str:
    following = body[index + 1] if index + 1 < len(body) else None
    if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
        return inspect.cleandoc(str(following.value.value))
    return ""


def _top_level_bindings(module: ModuleType) -> dict[str, str]:
    """Names bound at top level of the module's source by def, class or assignment (imports excluded), each with
    the docstring written under an assignment."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return {}
    names: dict[str, str] = {}
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = ""
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = _string_after(tree.body, index)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = _string_after(tree.body, index)
    return names


def _module_page(module: ModuleType) -> ModulePage:
    page = ModulePage(module.__name__, bound=_top_level_bindings(module))
    exported = getattr(module, "__all__", None)
    if exported is None:
        exported = [name for name in page.bound if not name.startswith("_")]
    page.exported = [name for name in exported if not name.startswith("__")]
    if hasattr(module, "__path__"):
        page.submodules = sorted(
            f"{module.__name__}.{info.name}" for info in pkgutil.iter_modules(module.__path__) if _is_public(info.name)
        )
    return page


def collect_pages(roots: list[str]) -> tuple[dict[str, ModulePage], list[str]]:
    """Pages of every public module under ``roots`` and the import errors met on the way."""
    pages: dict[str, ModulePage] = {}
    errors: list[str] = []
    pending = list(roots)
    while pending:
        name = pending.pop(0)
        if name in pages:
            continue
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any import failure is reported, the build then fails
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        pages[name] = _module_page(module)
        pending += pages[name].submodules
    return pages, errors


def _home(obj: object, pages: dict[str, ModulePage]) -> str | None:
    """``module.name`` where the function or class ``obj`` is documented under its own name, or None."""
    module, name = getattr(obj, "__module__", None), getattr(obj, "__name__", None)
    if not (inspect.isclass(obj) or callable(obj)) or module not in pages or name is None:
        return None
    page = pages[module]
    return f"{module}.{name}" if name in page.bound and name in page.exported else None


def _directive(obj: object) -> str:
    if inspect.isclass(obj):
        return "autoexception" if issubclass(obj, BaseException) else "autoclass"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj) or inspect.ismethod(obj):
        return "autofunction"
    return "autodata"


def render(page: ModulePage, pages: dict[str, ModulePage]) -> str:
    """The reStructuredText of one module's page: the module docstring, then each exported name, documented in full
    when this is its home (or it has no other page), else as a short alias entry linking to its home."""
    module = importlib.import_module(page.name)
    lines = [page.name, "=" * len(page.name), "", f".. automodule:: {page.name}", "   :no-members:", ""]
    for name in page.exported:
        obj = getattr(module, name, None)
        home = _home(obj, pages)
        if _directive(obj) == "autodata" and not page.bound.get(name):
            # autodoc would show the docstring of the value's type (``dict``'s, ``str``'s): declare the name instead
            lines += [f".. py:data:: {name}", f"   :module: {page.name}", "", f"   A ``{type(obj).__name__}``.", ""]
        elif home is None or home == f"{page.name}.{name}":
            lines += [f".. {_directive(obj)}:: {page.name}.{name}", ""]
        elif name in page.bound:
            lines += [f".. py:data:: {name}", f"   :module: {page.name}", "", f"   Alias of :py:obj:`{home}`.", ""]
            doc = page.bound[name]
            lines += [f"   {line}" if line else "" for line in doc.splitlines()] + [""] if doc else []
        else:
            # an entry under the name users import (``verl.workers.config.HFModelConfig``), so a reference spelled
            # that way resolves; it points at the one full description
            kind = "class" if inspect.isclass(obj) else "function"
            lines += [f".. py:{kind}:: {name}", f"   :module: {page.name}", "   :no-index-entry:", ""]
            lines += [f"   Alias of :py:obj:`{home}`.", ""]
    if page.submodules:
        lines += [".. rubric:: Modules", "", ".. toctree::", "   :maxdepth: 1", ""]
        lines += [f"   {sub}" for sub in page.submodules if sub in pages]
        lines.append("")
    return "\n".join(lines)


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def generate(app: Sphinx) -> None:
    srcdir = Path(app.srcdir)
    roots = root_packages((srcdir / INDEX).read_text(encoding="utf-8"))
    pages, errors = collect_pages(roots)
    for error in errors:
        logger.warning("API reference: cannot import %s", error, type="verl_apidoc")
    out = srcdir / OUT_DIR
    out.mkdir(parents=True, exist_ok=True)
    wanted = {f"{name}.rst" for name in pages}
    for stale in out.glob("*.rst"):
        if stale.name not in wanted:
            stale.unlink()
    for name, page in pages.items():
        _write_if_changed(out / f"{name}.rst", render(page, pages))


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", generate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
