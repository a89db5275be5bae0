"""Processes an engine run leaves behind, found and killed between the runs of one benchmark call.

A ``main_ppo`` run starts Ray (its head and workers run in sessions of their own) and the engines its workers spawn
(SGLang's scheduler and detokenizer, vLLM's engine core). When the run is killed at its timeout, or its workers die
without reaping their children, those processes outlive it. They keep GPU memory and, SGLang's scheduler, a busy CPU
core, so the next run of the same call starts on a crowded card. (Suspected, not shown: in sessions 13 and 14 the bare
vLLM engine, run after SGLang's runs on one H100, did not start in 300 s, against 129 s on an H200 whose GPU held
nothing else.)

Linux only: reads ``/proc``, so it needs nothing beyond the standard library on the device image.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

ENGINE_PATTERNS = ("sglang::", "ray::", "raylet", "gcs_server", "EngineCore", "main_ppo", "vllm.entrypoints")
"""Command-line fragments of the processes an engine run starts (Ray's names its workers ``ray::<Actor>``)."""


def _parent(pid: int) -> int | None:
    """``pid``'s parent pid, None when it is gone. ``/proc/PID/stat`` is ``pid (comm) state ppid ...``; ``comm`` may
    hold spaces and parentheses, so the fields are read after its last ``)``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _ancestors(pid: int) -> set[int]:
    """``pid`` and every process above it (up to pid 1)."""
    chain = set()
    while pid and pid not in chain:
        chain.add(pid)
        pid = _parent(pid) or 0
    return chain


def descendants(pid: int) -> list[int]:
    """Every live process under ``pid``, children first."""
    children: dict[int, list[int]] = {}
    for other in _pids():
        parent = _parent(other)
        if parent is not None:
            children.setdefault(parent, []).append(other)
    found, queue = [], list(children.get(pid, []))
    while queue:
        child = queue.pop(0)
        found.append(child)
        queue.extend(children.get(child, []))
    return found


def kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL ``process`` and every process under it (a run cut at its timeout; ``Popen.kill`` alone orphans Ray and
    the engines)."""
    for pid in [*descendants(process.pid), process.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # gone already
            pass


def sweep(patterns: tuple[str, ...] = ENGINE_PATTERNS) -> list[str]:
    """SIGKILL every process whose command line holds one of ``patterns``, except this process and its ancestors
    (the benchmark's own command line may name an engine: ``--runs standalone-vllm``). Returns ``"pid command"`` of
    each process killed."""
    keep = _ancestors(os.getpid())
    killed = []
    for pid in _pids():
        command = _command_line(pid)
        if pid in keep or not command or not any(p in command for p in patterns):
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
        killed.append(f"{pid} {command[:120]}")
    return killed


def gpu_memory_used_mib() -> list[int]:
    """Each GPU's used memory in MiB (``nvidia-smi``), empty where there is none."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    return [int(line) for line in out.split() if line.strip().isdigit()]
