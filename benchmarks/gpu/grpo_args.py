"""The command line of ``benchmarks.bench_gpu_grpo``: its arguments, runs, lanes and variants, checked before any
GPU work (``tests/benchmarks/test_calls.py`` parses every preset of ``benchmarks/gpu/calls.sh`` with it on CPU)."""

from __future__ import annotations

import argparse
import os

from benchmarks.gpu.grpo_table import setup_of, split_run
from benchmarks.gpu.random_model import parse_fields

ALL_RUNS = ("vllm", "standalone-vllm", "sglang", "standalone-sglang", "trl", "hf")
DESCRIPTION = "GPU GRPO benchmark: verl's step with each rollout engine, the bare engines, and TRL, on one GPU"


def parse_lanes(spec: str) -> dict[str, list[str]]:
    """``"0=vllm,standalone-vllm;1=sglang"`` -> ``{"0": ["vllm", "standalone-vllm"], "1": ["sglang"]}``."""
    lanes: dict[str, list[str]] = {}
    for part in (p.strip() for p in spec.split(";")):
        if not part:
            continue
        gpu, sep, names = part.partition("=")
        runs = [n.strip() for n in names.split(",") if n.strip()]
        if not sep or not gpu.strip().isdigit() or not runs:
            raise ValueError(f"--lanes: {part!r} is not GPU=run,run (e.g. 0=vllm,standalone-vllm)")
        if gpu.strip() in lanes:
            raise ValueError(f"--lanes: GPU {gpu.strip()} has two lanes; list its runs in one")
        lanes[gpu.strip()] = runs
    if not lanes:
        raise ValueError("--lanes is empty")
    return lanes


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, dict[str | None, list[str]], list[str]]:
    """The arguments, the lanes (GPU or None -> run names) and all runs in order; ``args.variants`` maps each
    ``--variant`` name to its entries. Exits naming the argument when a run, lane or variant is unknown."""
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--out", default=os.environ.get("OUT", "bench_gpu_out"))
    parser.add_argument("--data", default=".carry_gpu14/data", help="folder with train.parquet and test.parquet")
    parser.add_argument("--model", default=None, help="HF model folder (default: the converted SmolLM2)")
    parser.add_argument(
        "--random-model",
        type=lambda text: [entry for entry in text.split(",") if entry],
        help="KEY=VALUE,...: a random-weight model with these config fields replaced instead (SmolLM2's 9 heads do "
        "not split at TP=2: hidden_size=512,num_attention_heads=8,num_key_value_heads=2 do)",
    )
    parser.add_argument("--runs", default=",".join(ALL_RUNS), help=f"comma-separated subset of {ALL_RUNS}")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument(
        "--standalone-repeats",
        type=int,
        default=5,
        help="timed generations of each bare engine (more make its rate at the same host speed firmer)",
    )
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.15)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per run")
    parser.add_argument(
        "--gpu-monitor",
        action="store_true",
        help="log nvidia-smi pmon/dmon and top once a second and per-thread CPU every 0.25 s during each verl run "
        "(<run>.pmon.log / .dmon.log / .top.log / .cpu.jsonl)",
    )
    parser.add_argument(
        "--memory-sample-ms",
        type=float,
        default=100,
        help="NVML memory sampling period for the per-phase peaks (0: off, the table then shows the workers' device"
        " use as each phase ends; at 10 ms sampling slowed a colocated engine by a third, at 100 ms it may still)",
    )
    parser.add_argument("--override", action="append", default=[], help="extra main_ppo override (repeatable)")
    parser.add_argument("--training", choices=("fast", "plain"), default="fast", help="see FAST_TRAINING")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME=key=value,key=value: overrides of the runs named ENGINE@NAME in --runs (repeatable)",
    )
    parser.add_argument(
        "--lanes",
        default=None,
        help="GPU=run,run;GPU=run,...: one lane per GPU, lanes at once, runs of a lane in turn (replaces --runs)",
    )
    parser.add_argument("--py-spy", default="py-spy", help="py-spy executable for runs of a pyspy* variant")
    parser.add_argument("--site-vllm", default="/tmp/site-vllm")
    parser.add_argument("--site-sglang", default="/tmp/site-sglang")
    parser.add_argument("--site-common", default="/tmp/site-common")
    parser.add_argument("--site-model", default="/tmp/site-model")
    parser.add_argument("--cache-dir", default="/tmp/verl_cache")
    args = parser.parse_args(argv)
    try:
        lanes = parse_lanes(args.lanes) if args.lanes else {None: [r for r in args.runs.split(",") if r]}
    except ValueError as error:
        parser.error(str(error))
    runs = [name for lane in lanes.values() for name in lane]
    try:
        args.random_fields = parse_fields(args.random_model or [])
    except ValueError as error:
        parser.error(f"--random-model: {error}")
    args.variants = {}
    for spec in args.variant:
        name, _, overrides = spec.partition("=")
        args.variants[name] = [o for o in overrides.split(",") if o]
    unknown = {r for r in runs if split_run(r)[0] not in ALL_RUNS}
    unknown |= {r for r in runs if split_run(r)[1] and split_run(r)[1] not in args.variants}
    unknown |= {r for r in runs if split_run(r)[1] and split_run(r)[0] == "trl"}
    if unknown:
        parser.error(f"unknown runs {sorted(unknown)}; choose from {ALL_RUNS} (engines may take @VARIANT)")
    if len(set(runs)) != len(runs):
        parser.error(f"a run is named twice in {runs}: each run's files are named after it (a repeat is NAME#2)")
    for index, name in enumerate(runs):
        repeat = name.partition("#")[2]
        if "#" in name and (not repeat.isdigit() or setup_of(name) not in map(setup_of, runs[:index])):
            parser.error(f"run {name!r}: a repeat is NAME#N (N a number) after the run NAME itself in --runs")
    return args, lanes, runs
