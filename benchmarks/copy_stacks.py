"""Where a step's copies come from: copy ops grouped by the Python frames that launched them (issue 15's update
benchmark, its ``+stacks`` variants: which code pays for the device time of copies and casts)."""

from __future__ import annotations

import re

COPY_OPS = ("aten::copy_", "aten::clone", "aten::_to_copy", "aten::contiguous", "aten::cat", "aten::_foreach_copy_")
"""The profiler op names counted as copies (a nested one counts with the outermost)."""


def profile_copy_stacks(step, rows: int = 25, depth: int = 8) -> str:
    """The copy ops of one ``step()`` (:data:`COPY_OPS`, outermost only) grouped by the ``depth`` innermost
    Python frames that called them, the ``rows`` costliest by the device time of the kernels and memcpys they
    launched. The profiler's Python tracer (``with_stack=True``) records each frame as the op's parent event."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True) as prof:
        step()
        torch.cuda.synchronize()
    return copy_stack_table(prof.events(), rows, depth)


def copy_stack_table(events, rows: int, depth: int) -> str:
    """:func:`profile_copy_stacks`'s grouping of profiler ``events`` (FunctionEvents with ``cpu_parent`` links)."""
    frame = re.compile(r".+\(\d+\): ")
    wrappers = ("torch/nn/modules/module.py",)  # _call_impl frames say nothing
    groups: dict[tuple, list[float]] = {}
    for event in events:
        if event.name not in COPY_OPS:
            continue
        frames, parent, nested = [], event.cpu_parent, False
        while parent is not None:
            if parent.name in COPY_OPS:
                nested = True  # counted with the outer copy op
                break
            if frame.match(parent.name) and not parent.name.startswith(wrappers):
                frames.append(parent.name)
            parent = parent.cpu_parent
        if nested:
            continue
        entry = groups.setdefault((event.name, tuple(frames[:depth])), [0.0, 0])
        entry[0] += event.device_time_total
        entry[1] += 1
    ranked = sorted(groups.items(), key=lambda item: item[1][0], reverse=True)
    total_us = sum(v[0] for v in groups.values())
    lines = [f"COPY STACKS {total_us / 1e3:.1f} ms of device time in {sum(v[1] for v in groups.values())} copy ops"]
    for (name, frames), (device_us, count) in ranked[:rows]:
        lines.append(f"-- {name} x{count}: {device_us / 1e3:.2f} ms device")
        lines += [f"     {f}" for f in frames]
    return "\n".join(lines)
