"""Processes an engine run leaves behind, found and killed between the runs of one benchmark call.

A ``main_ppo`` run starts Ray (its head and workers run in sessions of their own) and the engines its workers spawn
(SGLang's scheduler and detokenizer, vLLM's engine core). When the run is killed at its timeout, or its workers die
without reaping their children, those processes outlive it. They keep GPU memory and, SGLang's scheduler, a busy CPU
core, so the next run of the same call starts on a crowded card. (Sessions 13 and 14 suspected them of the bare vLLM
engine's slow cold start; session 15 traced that to FlashInfer's sampler warm-up: ``bench_gpu_grpo.json_run_env``.)

psutil finds the processes (in the device image, and what ``tests/trainer/main_ppo_runner.py`` uses for the same job).

``python -m benchmarks.gpu.leftovers [--pattern P ...]`` sweeps from a shell (``benchmarks/gpu/call_env.sh`` after each
job of a call). It spares its ancestors, so a call whose own ``bash -c`` names an engine (``--runs sglang,trl,vllm``)
survives; the ``pkill -f`` it replaces killed that call's shell in session 15 and lost the job's archive.
"""

from __future__ import annotations

import argparse
import subprocess

import psutil

ENGINE_PATTERNS = (
    "sglang::",
    "ray::",
    "raylet",
    "gcs_server",
    "EngineCore",
    "main_ppo",
    "vllm.entrypoints",
    "benchmarks.gpu.standalone_engine",
    "benchmarks.gpu.trl_grpo",
)
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="kill leftover engine processes (never this one or its ancestors)")
    parser.add_argument(
        "--pattern", action="append", help=f"command-line fragment (repeatable; default {ENGINE_PATTERNS})"
    )
    args = parser.parse_args(argv)
    for line in sweep(tuple(args.pattern) if args.pattern else ENGINE_PATTERNS):
        print(f"killed leftover {line}", flush=True)


if __name__ == "__main__":
    main()
