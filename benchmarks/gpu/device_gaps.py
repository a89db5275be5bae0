"""Where a profiled step leaves the device idle: the gaps between its kernels, each put down to the host op that
was running at the gap's middle (issue 15's update benchmark: is the step bound by the host or by the device?
Session 31's 0.5B step: busy 489 ms of 520, so the device).

A gap whose middle no host op covers is Python between ops (or the profiler's own work); one inside
``cudaStreamSynchronize`` / ``aten::_local_scalar_dense`` is the host waiting on a sync it asked for, and the gap
after such a wait is the host catching up.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass

NO_HOST_OP = "(no host op: Python)"
"""The label of a gap whose middle falls between host ops on every thread."""


@dataclass(frozen=True)
class GapReport:
    """The device's idle time in a profiled window, in microseconds, by the host op at the middle of each gap."""

    window_us: float
    """From the first kernel's start to the last kernel's end."""
    busy_us: float
    """The union of the kernels' (and memcpys') device intervals."""
    gaps: int
    """Gaps of at least the threshold."""
    gap_us: float
    """Their total."""
    by_label: dict[tuple[str, str], tuple[float, int]]
    """``(outermost op, innermost op)`` -> ``(gap microseconds, gaps)``."""


DEVICE_WORK = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
"""Kineto's activity types that occupy the device (its ``gpu_user_annotation`` spans only name a stretch of them)."""


def _on_device(event) -> bool:
    return str(event.device_type).rsplit(".", 1)[-1] != "CPU"


def _is_device_work(event) -> bool:
    kind = getattr(event, "activity_type", None)
    return kind in DEVICE_WORK if kind else _on_device(event)


def _merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


class _HostTree:
    """Host ops per thread as their nesting (``cpu_parent`` links): the innermost op covering a time, fast."""

    def __init__(self, events) -> None:
        host = [e for e in events if not _on_device(e) and not getattr(e, "is_async", False)]
        members = {id(e) for e in host}
        self.children: dict[int, list] = defaultdict(list)
        roots: dict[object, list] = defaultdict(list)
        for event in host:
            parent = getattr(event, "cpu_parent", None)
            if parent is not None and id(parent) in members:
                self.children[id(parent)].append(event)
            else:
                roots[getattr(event, "thread", 0)].append(event)
        self.roots = [self._sorted(level) for level in roots.values()]
        for key, level in self.children.items():
            self.children[key] = self._sorted(level)

    @staticmethod
    def _sorted(level: list) -> tuple[list, list[float]]:
        level = sorted(level, key=lambda e: e.time_range.start)
        return level, [e.time_range.start for e in level]

    @staticmethod
    def _covering(level: tuple[list, list[float]], at: float):
        events, starts = level
        i = bisect.bisect_right(starts, at) - 1
        return events[i] if i >= 0 and events[i].time_range.end >= at else None

    def chain_at(self, at: float) -> list:
        """The deepest chain of nested host ops covering ``at`` over all threads, outermost first."""
        best: list = []
        for level in self.roots:
            chain, event = [], self._covering(level, at)
            while event is not None:
                chain.append(event)
                below = self.children.get(id(event))
                event = self._covering(below, at) if below else None
            if len(chain) > len(best):
                best = chain
        return best


def device_gaps(events, min_gap_us: float = 10.0) -> GapReport:
    """The :class:`GapReport` of profiler ``events`` (``prof.events()``: device kernels and host ops alike)."""
    busy = _merged([(e.time_range.start, e.time_range.end) for e in events if _is_device_work(e)])
    if not busy:
        return GapReport(0.0, 0.0, 0, 0.0, {})
    tree = _HostTree(events)
    by_label: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    gaps = 0
    for (_, end), (start, _) in zip(busy[:-1], busy[1:]):
        if start - end < min_gap_us:
            continue
        gaps += 1
        chain = tree.chain_at((start + end) / 2)
        label = (chain[0].name, chain[-1].name) if chain else (NO_HOST_OP, NO_HOST_OP)
        by_label[label][0] += start - end
        by_label[label][1] += 1
    return GapReport(
        window_us=busy[-1][1] - busy[0][0],
        busy_us=sum(end - start for start, end in busy),
        gaps=gaps,
        gap_us=sum(total for total, _ in by_label.values()),
        by_label={label: (total, int(count)) for label, (total, count) in by_label.items()},
    )


def gap_table(report: GapReport, rows: int = 20) -> str:
    """``report`` as text: the totals, then the ``rows`` labels with the most idle time."""
    idle = report.window_us - report.busy_us
    lines = [
        f"DEVICE GAPS busy {report.busy_us / 1e3:.1f} ms of a {report.window_us / 1e3:.1f} ms window (idle "
        f"{idle / 1e3:.1f} ms); {report.gaps} gaps of the threshold or more, {report.gap_us / 1e3:.1f} ms"
    ]
    ranked = sorted(report.by_label.items(), key=lambda item: item[1][0], reverse=True)
    for (outer, inner), (total, count) in ranked[:rows]:
        lines.append(f"  {total / 1e3:8.2f} ms {count:6d}x  {outer[:60]}  >  {inner[:60]}")
    return "\n".join(lines)
