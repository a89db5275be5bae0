"""Processes an engine run leaves behind, found and killed between the runs of one benchmark call.

A ``main_ppo`` run starts Ray (its head and workers run in sessions of their own) and the engines its workers spawn
(SGLang's scheduler and detokenizer, vLLM's engine core). When the run is killed at its timeout, or its workers die
without reaping their children, those processes outlive it. They keep GPU memory and, SGLang's scheduler, a busy CPU
core, so the next run of the same call starts on a crowded card. (Suspected, not shown: in sessions 13 and 14 the bare
vLLM engine, run after SGLang's runs on one H100, did not start in 300 s, against 129 s on an H200 whose GPU held
nothing else.)

psutil finds the processes (in the device image, and what ``tests/trainer/main_ppo_runner.py`` uses for the same job).
"""

from __future__ import annotations

import subprocess

import psutil

ENGINE_PATTERNS = ("sglang::", "ray::", "raylet", "gcs_server", "EngineCore", "main_ppo", "vllm.entrypoints")
"""Command-line fragments of the processes an engine run starts (Ray's names its workers ``ray::<Actor>``)."""


def descendants(pid: int) -> list[int]:
    """Every live process under ``pid``."""
    try:
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            psutil.Process(pid).kill()
        except psutil.NoSuchProcess:  # gone already
            pass


def kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL ``process`` and every process under it (a run cut at its timeout; ``Popen.kill`` alone orphans Ray and
    the engines)."""
    _kill([*descendants(process.pid), process.pid])


def sweep(patterns: tuple[str, ...] = ENGINE_PATTERNS) -> list[str]:
    """SIGKILL every process whose command line holds one of ``patterns``, except this process and its ancestors
    (the benchmark's own command line may name an engine: ``--runs standalone-vllm``). Returns ``"pid command"`` of
    each process killed."""
    me = psutil.Process()
    keep = {me.pid, *(parent.pid for parent in me.parents())}
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        if process.info["pid"] not in keep and any(p in command for p in patterns):
            found.append((process.info["pid"], command))
    _kill([pid for pid, _ in found])
    return [f"{pid} {command[:120]}" for pid, command in found]


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
