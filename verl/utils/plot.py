"""Training curves from the ``file`` logger: ``python -m verl.utils.plot <metrics.jsonl> [more.jsonl ...] [--out DIR]``.

Reads the jsonl that ``trainer.logger=[...,file]`` writes (one ``{"step": N, "data": {...}}`` per line: the ``file``
backend of :mod:`verl.utils.tracking`) and renders the standard panels (:data:`PANELS`: score, reward, response
length, response clip ratio, entropy, KL, grad norm, per-phase timing, throughput, validation accuracy) to one PNG
each plus ``index.html``, a single page with the images embedded as base64 (it needs no network and no other file).
Given several files, each panel overlays the runs, labelled by file name (or ``--label``). A panel whose metrics no
run logged is listed on the page as not logged rather than drawn empty.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Panel", "PANELS", "Run", "read_metrics", "render", "main"]


@dataclass(frozen=True)
class Panel:
    """One figure: every metric whose key matches ``pattern`` (a regex, full match) is one line per run."""

    slug: str
    """File name of the PNG (``<slug>.png``)."""
    title: str
    pattern: str
    ylabel: str = ""


PANELS: tuple[Panel, ...] = (
    Panel("score", "Score (mean per step)", r"critic/score/mean"),
    Panel("reward", "Reward (mean per step, after KL penalty)", r"critic/rewards/mean"),
    Panel("response_length", "Response length", r"response_length/mean", "tokens"),
    Panel("response_clip_ratio", "Responses cut at max_response_length", r"response_length/clip_ratio", "fraction"),
    Panel("entropy", "Policy entropy", r"actor/entropy", "nats/token"),
    Panel("kl", "KL", r"actor/(ppo_kl|kl_loss|reward_kl_penalty)"),
    Panel("grad_norm", "Gradient norm", r"(actor|critic)/grad_norm"),
    Panel("timing", "Time per phase", r"timing_s/(?!step$).+", "seconds"),
    Panel("throughput", "Throughput", r"perf/throughput", "tokens/s per GPU"),
    Panel("val_accuracy", "Validation", r"val-core/.+"),
)
"""The standard panels, in page order; keys are those the PPO trainer logs (``docs/quickstart.md``, Logging)."""


@dataclass
class Run:
    """One metrics file: ``series[key]`` is a list of ``(step, value)`` sorted by step (numeric values only)."""

    label: str
    series: dict[str, list[tuple[int, float]]]


def read_metrics(path: str | Path, label: str | None = None) -> Run:
    """Parse a ``file``-logger jsonl; a line that is not a ``{"step", "data"}`` record fails naming file and line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"metrics file {path} does not exist (write one with trainer.logger=[console,file]).")
    series: dict[str, dict[int, float]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            step, data = int(record["step"]), record["data"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f'{path}:{number}: not a file-logger record {{"step": N, "data": {{...}}}} ({exc})'
            ) from exc
        for key, value in data.items():
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                series.setdefault(key, {})[step] = float(value)
    return Run(label or path.stem, {key: sorted(points.items()) for key, points in series.items()})


def _panel_keys(panel: Panel, runs: list[Run]) -> list[str]:
    regex = re.compile(panel.pattern)
    return sorted({key for run in runs for key in run.series if regex.fullmatch(key)})


def _draw(panel: Panel, keys: list[str], runs: list[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
    styles = ["-", "--", ":", "-."]
    for index, run in enumerate(runs):
        for key in keys:
            points = run.series.get(key)
            if not points:
                continue
            steps, values = zip(*points, strict=True)
            label = key if len(runs) == 1 else f"{run.label}: {key}"
            # a sparse series (validation every test_freq steps) would be invisible as a line alone
            marker = "o" if len(points) <= 12 else None
            ax.plot(steps, values, styles[index % len(styles)], marker=marker, markersize=4, label=label)
    ax.set_title(panel.title)
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    if panel.ylabel:
        ax.set_ylabel(panel.ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def render(runs: list[Run], out: str | Path, panels: tuple[Panel, ...] = PANELS) -> Path:
    """Write ``<slug>.png`` for each panel some run logged and ``index.html`` embedding them; returns the page."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sections, missing = [], []
    for panel in panels:
        keys = _panel_keys(panel, runs)
        if not keys:
            missing.append(panel.title)
            continue
        png = out / f"{panel.slug}.png"
        _draw(panel, keys, runs, png)
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        sections.append(
            f'<figure id="{panel.slug}"><img alt="{html.escape(panel.title)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(panel.title)}: {html.escape(', '.join(keys))}</figcaption></figure>"
        )
    runs_text = ", ".join(html.escape(run.label) for run in runs)
    missing_text = f"<p>Not logged: {html.escape(', '.join(missing))}.</p>" if missing else ""
    page = out / "index.html"
    page.write_text(
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>verl training curves</title>"
        "<style>body{font-family:sans-serif;margin:1em}figure{display:inline-block;margin:0.5em}"
        "img{max-width:100%}figcaption{font-size:0.8em;color:#555}</style></head><body>"
        f"<h1>verl training curves</h1><p>Runs: {runs_text}</p>{missing_text}{''.join(sections)}</body></html>\n",
        encoding="utf-8",
    )
    return page


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(prog="python -m verl.utils.plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("metrics", nargs="+", help="file-logger jsonl files; several are overlaid")
    parser.add_argument("--out", help="output folder (default: plots/ next to the first metrics file)")
    parser.add_argument("--label", action="append", help="a label per metrics file, in order (default: file name)")
    args = parser.parse_args(argv)
    labels = args.label or []
    if labels and len(labels) != len(args.metrics):
        parser.error(f"--label given {len(labels)} times for {len(args.metrics)} metrics files; give one per file")
    if not labels:
        stems = [Path(path).stem for path in args.metrics]
        # two runs' files often share a name (metrics.jsonl in two folders): label those by folder too
        labels = [
            f"{Path(path).parent.name}/{stem}" if stems.count(stem) > 1 else stem
            for path, stem in zip(args.metrics, stems, strict=True)
        ]
    runs = [read_metrics(path, label) for path, label in zip(args.metrics, labels, strict=True)]
    out = Path(args.out) if args.out else Path(args.metrics[0]).parent / "plots"
    page = render(runs, out)
    print(f"Training curves: {page} (and one PNG per panel in {out})")
    return page


if __name__ == "__main__":
    main()
