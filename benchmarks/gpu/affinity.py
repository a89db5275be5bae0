"""A CPU core of its own for a colocated engine's scheduler (issue 14's in-loop SGLang gap).

SGLang's scheduler is CPU-bound for a 135M model: each decode step is mostly Python and kernel launches, and it uses
about 0.8 of a core while it decodes. Its decode rate is steady within a generation and changes from one generation
to the next, in the training loop (30-40% below the bare engine in most steps) and, less often, in the bare engine
itself (sessions 8-9). A thread's speed that is set when it wakes and stays for a whole generation fits where the
kernel places it: a vCPU whose hyperthread sibling is busy with another process (the trainer's worker, the
TaskRunner, the detokenizer) runs it markedly slower.

A run of a ``pin*`` variant tests that (``pinonly*``: the scheduler alone is moved). :func:`plan` reserves one
physical core (the last one: all its hyperthread siblings), the run's process tree starts on every other vCPU
(``preexec``), and a :class:`Pinner` moves every thread of each ``sglang::scheduler`` process that appears in the
tree onto the reserved core's first vCPU. Nothing else of the run can then share that core.

Session 13 (``benchmarks/results/gpu_session13_2026-11-27.md``): the H100 host's VM has one thread per core, and
pinning changed nothing beyond the run-to-run spread, which the bare engine shows as much as the loop.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

SCHEDULER = "sglang::scheduler"
"""The name SGLang's scheduler process gives itself (its ``comm`` and command line)."""


def sibling_groups(cpus: set[int] | None = None) -> list[list[int]]:
    """Physical cores as sorted lists of their vCPUs (hyperthread siblings), among ``cpus`` (default: this
    process's affinity), ordered by first vCPU; one vCPU per core where the topology is not readable."""
    cpus = set(os.sched_getaffinity(0)) if cpus is None else set(cpus)
    groups: dict[tuple[int, ...], list[int]] = {}
    for cpu in sorted(cpus):
        path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        try:
            siblings = tuple(sorted(_parse_list(path.read_text().strip()) & cpus))
        except OSError:
            siblings = (cpu,)
        groups.setdefault(siblings or (cpu,), list(siblings or (cpu,)))
    return sorted(groups.values())


def _parse_list(text: str) -> set[int]:
    """``"0-3,8,10-11"`` -> {0, 1, 2, 3, 8, 10, 11} (the kernel's CPU list format)."""
    cpus: set[int] = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def plan() -> tuple[int, set[int], list[list[int]]]:
    """(the scheduler's vCPU, every vCPU of the other cores, the core groups): the last physical core is reserved."""
    groups = sibling_groups()
    if len(groups) < 2:
        raise RuntimeError(f"pinning needs two physical cores; this process may run on {groups}")
    reserved, others = groups[-1], {cpu for group in groups[:-1] for cpu in group}
    return reserved[0], others, groups


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry))
    return children


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (not ``root`` itself)."""
    children, found, stack = _children(), [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _is_scheduler(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        comm = Path(f"/proc/{pid}/comm").read_text()
    except OSError:
        return False
    return SCHEDULER in command or comm.strip().startswith("sglang::sched")


class Pinner:
    """Keeps every thread of each SGLang scheduler below ``root`` on ``cpu`` (threads started later included: it
    looks again every ``interval`` seconds) until :meth:`stop`; ``pinned`` maps scheduler pids to their thread
    counts."""

    def __init__(self, root: int, cpu: int, interval: float = 0.2):
        self.root, self.cpu, self.interval = root, cpu, interval
        self.pinned: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scheduler-pinner", daemon=True)

    def start(self) -> Pinner:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for pid in descendants(self.root):
                if _is_scheduler(pid):
                    self.pin(pid)

    def pin(self, pid: int) -> None:
        """Move each thread of ``pid`` that is not yet on the reserved vCPU."""
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            return
        for tid in tids:
            try:
                if os.sched_getaffinity(tid) != {self.cpu}:
                    os.sched_setaffinity(tid, {self.cpu})
            except OSError:  # the thread ended
                continue
        self.pinned[pid] = len(tids)


class RunPin:
    """The pinning of one benchmark run: ``preexec`` (``Popen``'s) keeps the run's process tree off the reserved
    core (unless ``isolate`` is off: then only the scheduler moves, and the rest may still run beside it, as a
    rollout that pins its own scheduler could do), ``attach(process)`` starts the :class:`Pinner` on it, ``stop()``
    ends it and returns what was done."""

    def __init__(self, isolate: bool = True):
        self.cpu, self.others, self.groups = plan()
        self.isolate = isolate
        self.pinner: Pinner | None = None

    def preexec(self) -> None:
        if self.isolate:
            os.sched_setaffinity(0, self.others)

    def attach(self, process) -> None:
        self.pinner = Pinner(process.pid, self.cpu).start()

    def stop(self) -> dict:
        if self.pinner is not None:
            self.pinner.stop()
        pinned = self.pinner.pinned if self.pinner is not None else {}
        return {"pinned_cpu": self.cpu, "pinned_schedulers": len(pinned), "cores": len(self.groups),
                "reserved_core": self.groups[-1], "isolated": self.isolate}  # fmt: skip
