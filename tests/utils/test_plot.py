"""``python -m verl.utils.plot`` on small synthetic file-logger output: every standard panel is drawn, the page is
self-contained, and two runs overlay."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from verl.utils.plot import PANELS, read_metrics, render

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _write_run(path: Path, score_slope: float) -> None:
    """Six training steps with the keys the PPO trainer logs, validation before (step 0) and after (step 6), plus
    a string value the file logger writes for non-scalars (it must be skipped)."""
    lines = [{"step": 0, "data": {"val-core/arithmetic/acc/mean@1": 0.1}}]
    for step in range(1, 7):
        data = {
            "critic/score/mean": score_slope * step,
            "critic/rewards/mean": score_slope * step - 0.01,
            "response_length/mean": 20.0 - step,
            "response_length/clip_ratio": 0.5 / step,
            "actor/entropy": 1.0 / step,
            "actor/ppo_kl": 0.001 * step,
            "actor/kl_loss": 0.002 * step,
            "actor/grad_norm": 2.0 + step,
            "timing_s/gen": 3.0,
            "timing_s/update_actor": 4.0,
            "timing_s/step": 7.5,
            "perf/throughput": 90.0 + step,
            "actor/lr": 1e-5,
            "note": "not a number",
        }
        lines.append({"step": step, "data": data})
    lines.append({"step": 6, "data": {"val-core/arithmetic/acc/mean@1": 0.3}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    return struct.unpack(">II", header[16:24])


def test_read_metrics_merges_records_by_step(tmp_path):
    path = tmp_path / "run.jsonl"
    _write_run(path, 0.1)
    run = read_metrics(path)
    assert run.label == "run"
    # validation at steps 0 and 6 come from different records; both are kept, in step order
    assert run.series["val-core/arithmetic/acc/mean@1"] == [(0, 0.1), (6, 0.3)]
    assert run.series["actor/grad_norm"] == [(step, 2.0 + step) for step in range(1, 7)]
    assert "note" not in run.series


def test_malformed_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"step": 1, "data": {"a": 1}}\n{"oops": 2}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: not a file-logger record"):
        read_metrics(path)
    with pytest.raises(FileNotFoundError, match="trainer.logger"):
        read_metrics(tmp_path / "missing.jsonl")


def test_cli_renders_every_standard_panel_to_png_and_one_offline_page(tmp_path):
    metrics = tmp_path / "run.jsonl"
    _write_run(metrics, 0.1)
    out = tmp_path / "plots"
    result = subprocess.run(
        [sys.executable, "-m", "verl.utils.plot", str(metrics), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert str(out / "index.html") in result.stdout

    page = (out / "index.html").read_text(encoding="utf-8")
    for panel in PANELS:
        png = out / f"{panel.slug}.png"
        width, height = _png_size(png)
        assert width > 100 and height > 100
        assert f'id="{panel.slug}"' in page, f"panel {panel.slug} missing from the page"
    assert "Not logged" not in page
    # timing lists the phases but not the step total
    timing_caption = re.search(r'id="timing".*?<figcaption>(.*?)</figcaption>', page).group(1)
    assert "timing_s/gen" in timing_caption and "timing_s/update_actor" in timing_caption
    assert "timing_s/step" not in timing_caption

    # self-contained: every image is inline data, and nothing points at another file or the network
    sources = re.findall(r'src="([^"]*)"', page)
    assert len(sources) == len(PANELS) and all(src.startswith("data:image/png;base64,") for src in sources)
    assert not re.search(r"https?://|href=|<link|<script", page)


def test_two_runs_overlay_and_missing_panels_are_listed(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write_run(first, 0.1)
    _write_run(second, 0.05)
    single = render([read_metrics(first)], tmp_path / "single")
    both = render([read_metrics(first), read_metrics(second)], tmp_path / "both")
    assert "Runs: a, b" in both.read_text(encoding="utf-8")
    # the second run's lines are drawn into the same panel: the image differs from the first run alone
    assert (tmp_path / "both" / "score.png").read_bytes() != (tmp_path / "single" / "score.png").read_bytes()
    assert single.exists()

    only_score = tmp_path / "score_only.jsonl"
    only_score.write_text('{"step": 1, "data": {"critic/score/mean": 0.5}}\n', encoding="utf-8")
    page = render([read_metrics(only_score)], tmp_path / "partial").read_text(encoding="utf-8")
    assert 'id="score"' in page and 'id="entropy"' not in page
    assert "Not logged:" in page and "Policy entropy" in page
    assert not (tmp_path / "partial" / "entropy.png").exists()
