"""The docs site builds in strict mode (as ``make docs`` does), and strict mode catches what it should.

The full build runs on a temporary copy of ``docs/`` (the API pages it generates stay out of the worktree). The
failure cases build a small site with the real ``conf.py`` and extension, in seconds: a broken link, a reference to a
verl object that does not exist, and an API package that cannot be imported must each fail it (one build reports
them all).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
STRICT = ["-W", "--keep-going", "-n", "-q", "-j", "auto"]
"""``make docs``'s flags: strict, and pages read and written by one process per core (the full site's writing is
mostly furo's navigation tree, built for each page)."""


def _build(source: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", *STRICT, str(source), str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )


def _copy_docs(target: Path) -> Path:
    shutil.copytree(DOCS, target, ignore=shutil.ignore_patterns("_build", "generated"))
    return target


@pytest.mark.slow  # about 45 s of CPU (imports every documented module), several minutes on a loaded machine
def test_the_site_builds_without_warnings(tmp_path):
    source = _copy_docs(tmp_path / "docs")
    result = _build(source, tmp_path / "html")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr and "ERROR" not in result.stderr, result.stderr

    html = tmp_path / "html"
    # every page of docs/ is on the site, found by the index's glob without being listed
    for page in DOCS.glob("*.md"):
        assert (html / f"{page.stem}.html").is_file(), f"{page.name} is not on the site"
    # the API reference is generated from the docstrings
    protocol = (html / "api" / "generated" / "verl.protocol.html").read_text(encoding="utf-8")
    assert 'id="verl.protocol.DataProto"' in protocol
    core_algos = (html / "api" / "generated" / "verl.trainer.ppo.core_algos.html").read_text(encoding="utf-8")
    assert "compute_grpo_outcome_advantage" in core_algos
    # the config reference and the FAQ are pages of the site
    assert "actor_rollout_ref.actor.ppo_mini_batch_size" in (html / "config_reference.html").read_text("utf-8")
    assert "did you mean" in (html / "faq.html").read_text(encoding="utf-8")


@pytest.fixture
def small_site(tmp_path) -> Path:
    """The real conf.py and extension, one API package, two pages."""
    source = tmp_path / "site"
    (source / "api").mkdir(parents=True)
    shutil.copy(DOCS / "conf.py", source / "conf.py")
    shutil.copytree(DOCS / "_ext", source / "_ext")
    (source / "index.md").write_text("# Site\n\n```{toctree}\n:glob:\n\n*\napi/index\n```\n", encoding="utf-8")
    (source / "page.md").write_text("# Page\n\n## A section\n\nSee [the section](#a-section).\n", encoding="utf-8")
    (source / "api" / "index.md").write_text(
        "# API\n\n```{toctree}\n\ngenerated/verl.utils.registry\n```\n", encoding="utf-8"
    )
    return source


def test_small_site_builds(small_site, tmp_path):
    result = _build(small_site, tmp_path / "html")
    assert result.returncode == 0, result.stdout + result.stderr


PLANTED = {
    "page-link": ("See [the missing page](no_such_page.md).", "no_such_page"),
    "anchor-link": ("See [a missing section](#no-such-section).", "no-such-section"),
    "api-reference": ("See {py:class}`verl.protocol.NoSuchClass`.", "verl.protocol.NoSuchClass"),
}
"""Broken references planted in a page, each with what the build's report must name."""


def test_broken_links_and_an_api_package_that_fails_to_import_fail_the_build(small_site, tmp_path):
    """One build with every fault planted (each build imports verl and Sphinx again): with ``-W`` each warning alone
    fails the build, so each fault's own line in the report shows that it would."""
    page = small_site / "page.md"
    planted = "\n".join(text for text, _ in PLANTED.values())
    page.write_text(page.read_text(encoding="utf-8") + f"\n{planted}\n", encoding="utf-8")
    index = small_site / "api" / "index.md"
    index.write_text(index.read_text(encoding="utf-8").replace("verl.utils.registry", "verl.no_such_module"))
    result = _build(small_site, tmp_path / "html")
    assert result.returncode != 0
    for name, (_, expected) in PLANTED.items():
        assert expected in result.stderr, f"{name}: {expected} not reported\n{result.stderr}"
    assert "cannot import verl.no_such_module" in result.stderr, result.stderr
