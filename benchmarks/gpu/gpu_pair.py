"""Two processes of one script on two GPUs, one rank each, for the torch-only NCCL probes
(``nccl_env_mismatch``, ``nccl_transport``): each probe's ``main`` calls :func:`probe_main`, which runs its worker when
the script is started as one (``--worker``) and otherwise its cases, where the machine has two GPUs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class RankOutput:
    rank: int
    out: str
    """stdout and stderr together"""
    timed_out: bool


def rank_env(rank: int, port: int, own_gpu_only: bool, cumem: str | None, **extra: str) -> dict[str, str]:
    """The environment of rank ``rank`` of two: it sees its own GPU only (as a Ray worker) or both (as torchrun's),
    with ``NCCL_CUMEM_ENABLE`` set to ``cumem`` or left unset."""
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), **extra)
    if own_gpu_only:
        env.update(CUDA_VISIBLE_DEVICES=str(rank), LOCAL_RANK="0")
    else:
        env.update(CUDA_VISIBLE_DEVICES="0,1", LOCAL_RANK=str(rank))
    env.pop("NCCL_CUMEM_ENABLE", None)
    if cumem is not None:
        env["NCCL_CUMEM_ENABLE"] = cumem
    return env


def run_pair(module: str, envs: list[dict[str, str]], timeout_s: float) -> list[RankOutput]:
    """``python -m module --worker`` once per environment, all at once (from the current directory, the repository
    root); each one's output (killed after ``timeout_s``)."""
    command = [sys.executable, "-m", module, "--worker"]
    procs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for env in envs
    ]
    outputs = []
    for rank, proc in enumerate(procs):
        try:
            out, _ = proc.communicate(timeout=timeout_s)
            outputs.append(RankOutput(rank, out or "", False))
        except subprocess.TimeoutExpired:
            proc.kill()
            outputs.append(RankOutput(rank, proc.communicate()[0] or "", True))
    return outputs


def probe_main(name: str, worker: Callable[[], None], cases: Callable[[], None]) -> int:
    """``worker()`` in a process started by :func:`run_pair`; else ``cases()`` where two GPUs are visible."""
    if "--worker" in sys.argv:
        worker()
        return 0
    import torch

    if torch.cuda.device_count() < 2:
        print(f"{name}: needs two GPUs, skipped")
        return 0
    cases()
    return 0
