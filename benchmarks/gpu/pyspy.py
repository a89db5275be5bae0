"""py-spy for the GPU benchmarks: attach to the processes of a run by name, and summarise what they sampled.

``py-spy record --subprocesses`` around ``main_ppo`` reached the SGLang scheduler only 21 times in a whole run
(session 6): it finds descendants late through Ray's worker tree. :class:`Attacher` instead watches the run's
process tree and starts one ``py-spy record --pid`` per process whose title starts with a target prefix (SGLang
sets ``sglang::scheduler``; Ray sets ``ray::WorkerDict...``), from the moment it appears until it exits.

:func:`summarize` reads the ``--format raw`` files (one ``frame;frame;... count`` line per distinct stack, with
``process PID:"cmdline"`` frames at the root when several processes were sampled) and prints, for the samples of
one process inside a frame matching ``--within`` (default ``event_loop``: the scheduler's decode loop, not its
start-up), the functions with the most samples on top of the stack (self) and anywhere in it (inclusive).

Usage::

    python -m benchmarks.gpu.pyspy summarize FILE [--process sglang::scheduler] [--within event_loop] [--top 25]
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import threading
import time
from pathlib import Path

DEFAULT_TARGETS = ("sglang::scheduler", "sglang::detokenizer", "ray::WorkerDict")


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (``/proc/PID/task/*/children``; empty when the process is gone)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` in the process tree."""
    out, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def process_title(pid: int) -> str:
    """The title a process shows (``/proc/PID/cmdline``, which ``setproctitle`` rewrites); "" when it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class Attacher:
    """Samples every process below ``root_pid`` whose title starts with one of ``targets``: one
    ``py-spy record --pid`` each (100 Hz, ``--nonblocking``: the target is never paused), writing
    ``<prefix>.<label>.<pid>.pyspy.txt`` in raw format. ``stop()`` waits for the recorders to write (each ends when
    its process does) and kills any left after ``grace`` seconds."""

    def __init__(self, py_spy: str, root_pid: int, prefix: Path, targets=DEFAULT_TARGETS, poll_s: float = 0.5):
        self.py_spy, self.root_pid, self.prefix, self.targets, self.poll_s = py_spy, root_pid, prefix, targets, poll_s
        self.recorders: dict[int, subprocess.Popen] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Attacher:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in descendants(self.root_pid):
                if pid in self.recorders:
                    continue
                title = process_title(pid)
                target = next((t for t in self.targets if title.startswith(t)), None)
                if target is None:
                    continue
                label = target.replace("::", "_").replace("/", "_")
                output = Path(f"{self.prefix}.{label}.{pid}.pyspy.txt")
                command = [self.py_spy, "record", "--pid", str(pid), "--nonblocking", "--rate", "100"]
                command += ["--format", "raw", "--output", str(output)]
                log = open(f"{output}.log", "w")  # noqa: SIM115 - the recorder holds it until it exits
                self.recorders[pid] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
                log.close()
            self._stop.wait(self.poll_s)

    def stop(self, grace: float = 20.0) -> None:
        self._stop.set()
        self._thread.join()
        deadline = time.monotonic() + grace
        for recorder in self.recorders.values():
            try:
                recorder.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                recorder.send_signal(2)  # SIGINT: py-spy writes what it has and exits
                try:
                    recorder.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    recorder.kill()


def load_raw(path: str | os.PathLike) -> dict[str, collections.Counter]:
    """``{process: Counter({(frame, ...): samples})}`` of a raw py-spy file; a file of one process (no ``process``
    frames) is keyed ``""``."""
    per: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in Path(path).read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        parts = stack.split(";")
        roots = [i for i, p in enumerate(parts) if p.startswith("process ")]
        process = parts[roots[-1]] if roots else ""
        frames = tuple(parts[roots[-1] + 1 :] if roots else parts)
        per[process][frames] += int(count)
    return per


def summarize(path, process: str = "", within: str = "event_loop", top: int = 25) -> str:
    """Self and inclusive sample shares of the functions of the first process whose root frame contains
    ``process`` (any process when empty), counting only stacks with a frame containing ``within``."""
    per = load_raw(path)
    chosen = next((p for p in sorted(per, key=lambda p: -sum(per[p].values())) if process in p), None)
    if chosen is None:
        return f"no process matching {process!r} in {path} (found: {sorted(per)[:10]})"
    stacks = {f: c for f, c in per[chosen].items() if not within or any(within in frame for frame in f)}
    total = sum(stacks.values())
    lines = [f"{chosen[:100] or path}: {total} samples within {within!r} of {sum(per[chosen].values())}"]
    if not total:
        return "\n".join(lines)
    own: collections.Counter = collections.Counter()
    anywhere: collections.Counter = collections.Counter()
    for frames, count in stacks.items():
        if frames:
            own[frames[-1]] += count
        for frame in set(frames):
            anywhere[frame] += count
    lines.append("-- self")
    lines += [f"{count / total:6.1%}  {frame[:140]}" for frame, count in own.most_common(top)]
    lines.append("-- inclusive")
    lines += [f"{count / total:6.1%}  {frame[:140]}" for frame, count in anywhere.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    summary = sub.add_parser("summarize", help="self/inclusive sample shares of one process")
    summary.add_argument("file")
    summary.add_argument("--process", default="")
    summary.add_argument("--within", default="event_loop")
    summary.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    print(summarize(args.file, args.process, args.within, args.top))


if __name__ == "__main__":
    main()
