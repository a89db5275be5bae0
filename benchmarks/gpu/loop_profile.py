"""A profile of the training phases inside the GRPO loop's worker (issue 15): where ``update_actor`` and ``ref``
spend their time in the loop, which takes about twice the isolated update benchmark's time per token.

:func:`install` is a ``$VERL_WORKER_SETUP_HOOKS`` entry (:mod:`verl.trainer.ppo.worker_setup`): in every worker
process of the run it wraps ``ActorRole.update``, ``ActorRole.compute_log_prob`` and
``ReferenceRole.compute_ref_log_prob``. Every call's wall time inside the worker goes to
``$VERL_LOOP_PROFILE_DIR/calls.<pid>.jsonl`` (against the driver's ``timing_s/*`` it tells the worker's own time
from dispatch and transfer); the ``$VERL_LOOP_PROFILE_CALL``-th call of each (default 3: step 3, past compilation)
runs under ``torch.profiler`` (CPU and CUDA), whose op table by device time and by host time goes to
``<method>.<pid>.txt``, with the step's kernel time against its wall time.

    bench_gpu_grpo --runs sglang@profile --variant profile=   # a run whose variant is named profile...
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path

DIR_ENV, CALL_ENV = "VERL_LOOP_PROFILE_DIR", "VERL_LOOP_PROFILE_CALL"
TARGETS = {
    "verl.workers.actor.roles.ActorRole": ("update", "compute_log_prob"),
    "verl.workers.actor.roles.ReferenceRole": ("compute_ref_log_prob",),
}


def install() -> None:
    """Wrap the target methods of this process (a no-op without ``$VERL_LOOP_PROFILE_DIR``)."""
    if not os.environ.get(DIR_ENV):
        return
    import importlib

    for path, methods in TARGETS.items():
        module_name, _, class_name = path.rpartition(".")
        cls = getattr(importlib.import_module(module_name), class_name)
        for method in methods:
            setattr(cls, method, _wrapped(getattr(cls, method), f"{class_name}.{method}"))


def _wrapped(function, name: str):
    counter = {"calls": 0}
    profile_at = int(os.environ.get(CALL_ENV, "3"))
    out = Path(os.environ[DIR_ENV])
    out.mkdir(parents=True, exist_ok=True)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        import torch

        counter["calls"] += 1
        profiled = counter["calls"] == profile_at and torch.cuda.is_available()
        if profiled:
            from torch.profiler import ProfilerActivity, profile

            profiler = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            profiler.__enter__()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        begin = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            wall = time.perf_counter() - begin
            with open(out / f"calls.{os.getpid()}.jsonl", "a") as sink:
                sink.write(json.dumps({"method": name, "call": counter["calls"], "wall_s": wall}) + "\n")
            if profiled:
                profiler.__exit__(None, None, None)
                _write_profile(profiler, out / f"{name}.{os.getpid()}.txt", wall)

    return wrapper


def _write_profile(profiler, path: Path, wall: float) -> None:
    import torch

    events = profiler.key_averages()
    kernel_us = sum(e.self_device_time_total for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
    lines = [f"wall {wall:.3f} s (profiled); kernels {kernel_us / 1e6:.3f} s", ""]
    lines.append(events.table(sort_by="self_device_time_total", row_limit=30, max_name_column_width=70))
    lines.append(events.table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=70))
    path.write_text("\n".join(lines))
