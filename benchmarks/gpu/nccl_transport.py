"""Which transport NCCL picks between two GPUs of one host, and what it costs, as the loop's processes see them.
(GPU, two devices, torch only.)

Session 29's loop on two H200s: vLLM at TP=2 made 21k tok/s where SGLang at TP=2 made 42k, and the weight sync took
0.13-0.23 s against 0.05 s on one GPU. A Ray worker sees only its own GPU (``CUDA_VISIBLE_DEVICES`` of one entry);
NCCL's maintainers have said that hides the peer from CUDA IPC, and NCCL may then go through host shared memory
instead of NVLink, unless its cuMem path (``NCCL_CUMEM_ENABLE``, on by default in recent NCCL; SGLang turns it off)
reaches the peer anyway. This runs two processes per case and reports, for each:

- the transport NCCL logged for the pair (``NCCL_DEBUG=INFO``: ``via P2P/CUMEM``, ``via P2P/IPC``, ``via SHM``...);
- one small all-reduce (8 KiB, a decode step's TP all-reduce at hidden 4096 in bf16), microseconds, median of 200;
- one all-gather of 256 MiB (a weight-sync bucket), GB/s of gathered bytes, median of 10.

Cases: ``isolated`` (each process sees its own GPU, as Ray workers) or ``shared`` (both see both and pick theirs, as
torchrun's), each with ``NCCL_CUMEM_ENABLE`` unset and ``=0``.

    python -m benchmarks.gpu.nccl_transport
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time

from benchmarks.gpu.gpu_pair import probe_main, rank_env, run_pair

CASES = {
    "isolated": {"visible": "own", "cumem": None},
    "isolated, cumem 0": {"visible": "own", "cumem": "0"},
    "shared": {"visible": "both", "cumem": None},
    "shared, cumem 0": {"visible": "both", "cumem": "0"},
}
SMALL_ELEMENTS = 4096  # bf16: 8 KiB
LARGE_ELEMENTS = 64 << 20  # bf16, per rank: 128 MiB sent, 256 MiB gathered
TRANSPORT = re.compile(r" via (.+?)\s*$")


def worker() -> None:
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    device = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=torch.device("cuda", device))
    small = torch.ones(SMALL_ELEMENTS, dtype=torch.bfloat16, device="cuda")
    for _ in range(20):
        dist.all_reduce(small)
    torch.cuda.synchronize()
    small_us = []
    for _ in range(200):
        start = time.perf_counter()
        dist.all_reduce(small)
        torch.cuda.synchronize()
        small_us.append((time.perf_counter() - start) * 1e6)
    send = torch.full((LARGE_ELEMENTS,), float(rank), dtype=torch.bfloat16, device="cuda")
    gathered = torch.empty(2 * LARGE_ELEMENTS, dtype=torch.bfloat16, device="cuda")
    dist.all_gather_into_tensor(gathered, send)
    torch.cuda.synchronize()
    large_s = []
    for _ in range(10):
        start = time.perf_counter()
        dist.all_gather_into_tensor(gathered, send)
        torch.cuda.synchronize()
        large_s.append(time.perf_counter() - start)
    correct = bool(gathered[:LARGE_ELEMENTS].eq(0).all() and gathered[LARGE_ELEMENTS:].eq(1).all())
    result = {
        "rank": rank,
        "small_allreduce_us": statistics.median(small_us),
        "allgather_gb_s": gathered.numel() * gathered.element_size() / statistics.median(large_s) / 1e9,
        "correct": correct,
    }
    print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


def run_case(name: str, port: int, timeout_s: float = 120) -> dict:
    case = CASES[name]
    envs = [
        rank_env(
            rank,
            port,
            own_gpu_only=case["visible"] == "own",
            cumem=case["cumem"],
            NCCL_DEBUG="INFO",
            NCCL_DEBUG_SUBSYS="INIT,P2P,SHM",
        )  # fmt: skip
        for rank in range(2)
    ]
    results, transports, errors = [], set(), []
    for output in run_pair("benchmarks.gpu.nccl_transport", envs, timeout_s):
        if output.timed_out:
            errors.append(f"rank {output.rank}: no answer within {timeout_s:.0f} s")
        for line in output.out.splitlines():
            if line.startswith("RESULT "):
                results.append(json.loads(line[len("RESULT ") :]))
            elif "Channel" in line and " via " in line:
                transports.update(TRANSPORT.findall(line))
            elif "Error" in line:
                errors.append(f"rank {output.rank}: {line.strip()[:300]}")
    return {"case": name, "transports": sorted(transports), "ranks": results, "errors": errors[:4]}


def run_cases() -> None:
    import torch

    print(f"torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
          f"{torch.cuda.get_device_name(0)}; NCCL_* preset: "
          f"{ {k: v for k, v in os.environ.items() if k.startswith('NCCL_')} }")  # fmt: skip
    print(f"{'case':<20} {'transport':<28} {'8 KiB all-reduce us':>20} {'256 MiB all-gather GB/s':>24}  correct")
    for index, name in enumerate(CASES):
        report = run_case(name, 29700 + index)
        ranks = report["ranks"]
        if len(ranks) == 2:
            small = max(r["small_allreduce_us"] for r in ranks)
            large = min(r["allgather_gb_s"] for r in ranks)
            ok = all(r["correct"] for r in ranks)
            print(f"{name:<20} {', '.join(report['transports']) or '?':<28} {small:>20.1f} {large:>24.1f}  {ok}")
        else:
            print(f"{name:<20} failed: {report['errors']}")
        print("RECORD " + json.dumps(report), flush=True)


def main() -> int:
    return probe_main("nccl_transport", worker, run_cases)


if __name__ == "__main__":
    sys.exit(main())
