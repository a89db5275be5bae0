"""Sphinx configuration of the verl documentation site (``make docs``; see docs/index.md for the choice of
Sphinx + MyST).

The pages are the Markdown files of this folder (MyST); the API reference is generated at build time by
``_ext/verl_apidoc.py`` and autodoc from the docstrings of the packages listed in ``api/index.md``. ``make docs`` and
``tests/docs/test_docs_build.py`` build with ``-W --keep-going -n``: a broken link, a missing reference or a
module that fails to import fails the build.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Document the tree this file is in, whichever verl the environment has installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))

import verl  # noqa: E402 - after the path set-up above

project = "verl"
author = "verl contributors"
copyright = "verl contributors"
release = version = verl.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "verl_apidoc",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]

# MyST: anchors for headings up to ### so that ``page.md#a-heading`` links are checked like page links.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# API reference: one page per public module, written into api/generated/ when the build starts (_ext/verl_apidoc.py).
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
autodoc_class_signature = "separated"
# Engines that only exist on GPU machines (each pins its own torch); their modules document the same without them.
autodoc_mock_imports = ["sglang"]
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# Strict references inside the verl namespace: a docstring role or type hint naming a verl object that does not
# exist fails the build. Targets in other libraries (torch, ray, the standard library, ...) are not resolved:
# intersphinx would need their inventories from the network, which the build must not need.
nitpicky = True
# Private names (a leading underscore anywhere in the path) have no page by design, nor do type variables (``T``).
nitpick_ignore_regex = [
    (r"py:.*", r"(?!verl\.).*"),
    (r"py:.*", r"verl\..*\._\w+.*"),
    (r"py:.*", r"verl\.[\w.]*\.[A-Z]"),
]
# A bare name in a type hint (``type``) that several documented attributes share is ambiguous, not broken: Sphinx
# links the first; every other reference warning stays fatal.
suppress_warnings = ["ref.python"]

html_theme = "furo"
html_title = f"verl {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
