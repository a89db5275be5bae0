"""Every code block of ``docs/quickstart.md`` marked runnable (an ``<!-- runnable -->`` line right above the fence)
runs and exits 0: ``bash`` blocks under ``bash -euo pipefail``, ``python`` blocks with this interpreter. Each runs in
a fresh temporary folder, with this interpreter's folder first on PATH (so ``python`` is this interpreter)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "quickstart.md"
MARKER = "<!-- runnable -->"
_RUNNABLE = re.compile(re.escape(MARKER) + r"\n```(bash|python)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def runnable_blocks(text: str) -> list[tuple[str, str]]:
    return _RUNNABLE.findall(text)


BLOCKS = runnable_blocks(QUICKSTART.read_text(encoding="utf-8"))


def test_every_marker_sits_on_a_bash_or_python_block():
    text = QUICKSTART.read_text(encoding="utf-8")
    assert text.count(MARKER) == len(BLOCKS) >= 3


@pytest.mark.parametrize(("language", "code"), BLOCKS, ids=[f"{lang}-{i}" for i, (lang, _) in enumerate(BLOCKS)])
def test_runnable_snippet(language, code, tmp_path):
    bin_dir = Path(sys.executable).parent  # the venv's bin: ``python`` there is this interpreter
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    command = ["bash", "-euo", "pipefail", "-c", code] if language == "bash" else [sys.executable, "-c", code]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{code}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
