"""Does an NCCL group fail when its ranks disagree on ``NCCL_CUMEM_ENABLE``? (GPU, two devices, torch only.)

Session 28's TP=2 SGLang loop failed at the actor's first all-gather ("Cuda failure 'invalid argument'"): SGLang's
``Engine`` sets ``NCCL_CUMEM_ENABLE=0`` in the process that builds it, and at TP=2 only the group's first rank builds
one. This runs two processes that each see only their own GPU, as Ray workers do, and all-gathers between them:

- ``same``: neither rank sets it (the actor's ranks after ``_launch_env`` puts the variable back);
- ``both0``: both set it to 0 (data parallel: every rank built an engine; session 28's dp2 run passed);
- ``mismatch``: only rank 0 sets it to 0 (TP=2 before the fix).

    python -m benchmarks.gpu.nccl_env_mismatch
"""

from __future__ import annotations

import os
import sys

from benchmarks.gpu.gpu_pair import probe_main, rank_env, run_pair

CASES = {"same": (None, None), "both0": ("0", "0"), "mismatch": ("0", None)}
"""Case -> ``NCCL_CUMEM_ENABLE`` of rank 0 and rank 1 (None: unset)."""
ELEMENTS = 1 << 20


def worker() -> None:
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(0)  # each process sees its own GPU only
    dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    mine = torch.full((ELEMENTS,), float(rank + 1), device="cuda")
    gathered = torch.empty(2 * ELEMENTS, device="cuda")
    try:
        dist.all_gather_into_tensor(gathered, mine)
        torch.cuda.synchronize()
        ok = bool(gathered[:ELEMENTS].eq(1).all() and gathered[ELEMENTS:].eq(2).all())
        print(f"rank {rank}: all-gather {'correct' if ok else 'WRONG VALUES'}", flush=True)
    except Exception as error:  # the finding, not a crash
        print(f"rank {rank}: {type(error).__name__}: {str(error)[:400]}", flush=True)
    dist.destroy_process_group()


def run_case(name: str, port: int, timeout_s: float = 60) -> None:
    envs = [rank_env(rank, port, own_gpu_only=True, cumem=cumem) for rank, cumem in enumerate(CASES[name])]
    print(f"== {name}: NCCL_CUMEM_ENABLE rank 0 {CASES[name][0]}, rank 1 {CASES[name][1]}", flush=True)
    for result in run_pair("benchmarks.gpu.nccl_env_mismatch", envs, timeout_s):
        rank, out = result.rank, result.out
        if result.timed_out:
            out = f"rank {rank}: no answer within {timeout_s:.0f} s (killed)\n" + out
        lines = [line for line in out.splitlines() if line.startswith(f"rank {rank}:") or "Error" in line]
        print("\n".join(lines[-4:]) or f"rank {rank}: no result line", flush=True)


def run_cases() -> None:
    for index, name in enumerate(CASES):
        run_case(name, 29600 + index)


def main() -> int:
    return probe_main("nccl_env_mismatch", worker, run_cases)


if __name__ == "__main__":
    sys.exit(main())
