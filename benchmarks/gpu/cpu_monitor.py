"""Who uses the CPUs while a colocated engine generates: per-thread CPU time of a run's processes and the host's
steal time, sampled from ``/proc`` every few hundred milliseconds (issue 14's in-loop SGLang gap).

The SGLang scheduler is CPU-bound for a 135M model: each decode step is mostly Python and kernel launches. Inside
the GRPO loop it decoded 30-45% slower than alone. ``top`` once a second showed, in the second of step 1's
generation, the training worker at ~500% CPU, the driver actor at ~400% and the VM's steal time at 7% of 64 vCPUs:
threads of the trainer's own processes may be taking the scheduler's CPU. One-second ``top`` frames cannot separate
generation from the phases around it, so this records thread by thread, and :func:`summarize` splits the samples
into those where the engine's scheduler is busy (it generates) and the rest.

Record (beside a run; stops on SIGTERM)::

    python -m benchmarks.gpu.cpu_monitor record --out run.cpu.jsonl --interval 0.25

Summarize (per process and per thread: CPU cores used on average while the scheduler is busy, and otherwise)::

    python -m benchmarks.gpu.cpu_monitor summarize run.cpu.jsonl --top 20

File format: one JSON object per line. ``{"names": {...}}`` lines name new threads (``"pid/tid": [process,
thread]``: the process's command line, shortened, and the thread's ``comm``); sample lines are ``{"t": seconds,
"dt": seconds, "host": {"user": .., "nice": .., "system": .., "idle": .., "steal": ..}, "threads": {"pid/tid":
[cores, cpu_number, system_cores]}}``. ``t`` is ``time.monotonic()`` at the end of the interval
(``time.perf_counter``'s clock on Linux, so a benchmark can place its phases); the host figures are cores (jiffies
over the interval); a thread's ``cores`` is its user+system time over the interval (only threads that ran), and
``system_cores`` the system part of it (files before session 23 have no third entry). A thread that spends more of
its time in the kernel is making system calls, which a sandboxed machine (gVisor) serves more slowly.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
HOST_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
DEFAULT_MATCH = ("ray::", "sglang", "main_ppo", "vllm", "VLLM", "bench_gpu", "python")
"""A process is watched when its command line contains one of these (the run's Python processes)."""
BUSY_PROCESS = "sglang::scheduler"
"""The process whose CPU use marks generation (the SGLang scheduler renames itself to this)."""


def _host_jiffies() -> list[int]:
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    return [int(x) for x in fields[: len(HOST_FIELDS)]]


def _command_line(pid: str) -> str | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def _thread_stat(pid: str, tid: str) -> tuple[str, int, int, int] | None:
    """(comm, user+system jiffies, system jiffies, last CPU) of one thread, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    open_paren, close_paren = text.index("("), text.rindex(")")
    comm = text[open_paren + 1 : close_paren]
    rest = text[close_paren + 2 :].split()
    # rest[0] is field 3 (state): utime is field 14, stime 15, processor 39
    return comm, int(rest[11]) + int(rest[12]), int(rest[12]), int(rest[36])


def _short(command: str, width: int = 60) -> str:
    """The command line on one line, at most ``width`` characters."""
    return " ".join(command.split())[:width]


@contextlib.contextmanager
def until_stopped(stop_after: float | None = None) -> Iterator[Callable[[], bool]]:
    """A recorder's loop condition: true until SIGTERM/SIGINT arrives or ``stop_after`` seconds have passed. The
    caller's signal handlers are back in place on leaving."""
    stopping = {"now": False}

    def _stop(*_):
        stopping["now"] = True

    handlers = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    begin = time.monotonic()
    try:
        yield lambda: not stopping["now"] and (stop_after is None or time.monotonic() - begin < stop_after)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def record(out: Path, interval: float, match: tuple[str, ...], stop_after: float | None = None) -> None:
    """Sample until SIGTERM/SIGINT (or ``stop_after`` seconds), appending to ``out``."""
    own = str(os.getpid())
    watched: dict[str, str | None] = {}  # pid -> short command line (None: not watched)
    previous_threads: dict[str, tuple[int, int]] = {}  # "pid/tid" -> (user+system, system) jiffies
    named: dict[str, list[str]] = {}  # "pid/tid" -> [process, thread] as last written
    samples = 0
    previous_host = _host_jiffies()
    previous_t = time.monotonic()
    with until_stopped(stop_after) as running, open(out, "w") as sink:
        while running():
            time.sleep(interval)
            now = time.monotonic()
            dt = now - previous_t
            host = _host_jiffies()
            host_cores = {
                name: round((b - a) / CLOCK_TICKS / dt, 3) for name, a, b in zip(HOST_FIELDS, previous_host, host)
            }
            threads: dict[str, list] = {}
            new_names: dict[str, list[str]] = {}
            current: dict[str, tuple[int, int]] = {}
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or pid == own:
                    continue
                if pid not in watched or (watched[pid] is not None and samples % 4 == 0):
                    # watched command lines are read again now and then: processes rename themselves
                    # (``sglang::scheduler``, ``ray::WorkerDict``) after they start
                    command = _command_line(pid)
                    if pid in watched and command is None:
                        continue
                    watched[pid] = _short(command) if command and any(m in command for m in match) else None
                if watched[pid] is None:
                    continue
                try:
                    tids = os.listdir(f"/proc/{pid}/task")
                except OSError:
                    continue
                for tid in tids:
                    stat = _thread_stat(pid, tid)
                    if stat is None:
                        continue
                    comm, jiffies, system, cpu = stat
                    key = f"{pid}/{tid}"
                    current[key] = (jiffies, system)
                    if named.get(key) != [watched[pid], comm]:
                        named[key] = new_names[key] = [watched[pid], comm]
                    before, system_before = previous_threads.get(key, (jiffies, system))
                    if jiffies > before:
                        per_core = CLOCK_TICKS * dt
                        threads[key] = [round((jiffies - before) / per_core, 3), cpu,
                                        round((system - system_before) / per_core, 3)]  # fmt: skip
            if new_names:
                sink.write(json.dumps({"names": new_names}) + "\n")
            sink.write(json.dumps({"t": round(now, 3), "dt": round(dt, 3), "host": host_cores,
                                   "threads": threads}) + "\n")  # fmt: skip
            sink.flush()
            previous_threads, previous_host, previous_t = current, host, now
            samples += 1


def load(path: Path) -> tuple[dict[str, list[str]], list[dict]]:
    names: dict[str, list[str]] = {}
    samples: list[dict] = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        record_ = json.loads(line)
        if "names" in record_:
            names.update(record_["names"])
        else:
            samples.append(record_)
    return names, samples


def summarize(
    path: Path,
    busy_process: str = BUSY_PROCESS,
    busy_cores: float = 0.5,
    top: int = 20,
    windows: list[tuple[float, float]] | None = None,
) -> dict:
    """Mean cores per process and per thread, and the host's steal/idle, over the ``busy`` samples and the others.

    A sample is busy when it ends inside one of ``windows`` (``time.monotonic()`` intervals, e.g. the generation
    phases of a run), or, without windows, when ``busy_process``'s threads together use at least ``busy_cores``
    (the scheduler generates). Returns the numbers; ``busy_samples`` 0 means no sample qualified."""
    names, samples = load(path)
    busy_keys = {key for key, (process, _) in names.items() if busy_process in process}

    def busy(sample: dict) -> bool:
        if windows is not None:
            return any(start <= sample["t"] <= end for start, end in windows)
        return sum(v[0] for k, v in sample["threads"].items() if k in busy_keys) >= busy_cores

    groups = {"busy": [s for s in samples if busy(s)], "other": [s for s in samples if not busy(s)]}
    result: dict = {"file": str(path), "busy_process": busy_process if windows is None else "windows",
                    "samples": len(samples)}  # fmt: skip
    for label, group in groups.items():
        result[f"{label}_samples"] = len(group)
        if not group:
            continue
        weight = sum(s["dt"] for s in group)
        per_process: dict[str, float] = defaultdict(float)
        per_thread: dict[str, float] = defaultdict(float)
        host: dict[str, float] = defaultdict(float)
        for s in group:
            for field, cores in s["host"].items():
                host[field] += cores * s["dt"] / weight
            for key, (cores, *_) in s["threads"].items():
                process, comm = names.get(key, ["?", "?"])
                pid = key.split("/")[0]
                per_process[f"{pid} {process}"] += cores * s["dt"] / weight
                per_thread[f"{pid} {process[:28]} | {comm}"] += cores * s["dt"] / weight
        result[label] = {
            "host_cores": {k: round(v, 2) for k, v in host.items()},
            "processes": sorted(((round(v, 2), k) for k, v in per_process.items()), reverse=True)[:top],
            "threads": sorted(((round(v, 2), k) for k, v in per_thread.items()), reverse=True)[:top],
        }
    return result


def print_summary(result: dict) -> None:
    """:func:`summarize`'s numbers as text."""
    print(f"{result['file']}: {result['samples']} samples; {result['busy_process']} busy in "
          f"{result.get('busy_samples', 0)}, not in {result.get('other_samples', 0)}")  # fmt: skip
    for label in ("busy", "other"):
        part = result.get(label)
        if not part:
            continue
        host = part["host_cores"]
        print(f"-- {label}: host cores user {host.get('user')} nice {host.get('nice')} system {host.get('system')} "
              f"steal {host.get('steal')} idle {host.get('idle')}")  # fmt: skip
        print("   processes (cores):")
        for cores, name in part["processes"]:
            print(f"   {cores:7.2f}  {name}")
        print("   threads (cores):")
        for cores, name in part["threads"]:
            print(f"   {cores:7.2f}  {name}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--interval", type=float, default=0.25)
    rec.add_argument("--match", action="append", default=None, help="command-line substring of watched processes")
    rec.add_argument("--stop-after", type=float, default=None, help="seconds (default: until SIGTERM)")
    summ = sub.add_parser("summarize")
    summ.add_argument("files", type=Path, nargs="+")
    summ.add_argument("--busy-process", default=BUSY_PROCESS)
    summ.add_argument("--busy-cores", type=float, default=0.5)
    summ.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.out, args.interval, tuple(args.match or DEFAULT_MATCH), args.stop_after)
    else:
        for path in args.files:
            print_summary(summarize(path, args.busy_process, args.busy_cores, args.top))


if __name__ == "__main__":
    main()
