"""Watching a GPU benchmark run: device memory per phase (NVML), and ``nvidia-smi pmon``/``dmon`` and ``top`` once a
second beside it (:mod:`benchmarks.bench_gpu_grpo`'s ``--memory-sample-ms`` and ``--gpu-monitor``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

PHASES = ("gen", "reward", "old_log_prob", "ref", "values", "adv", "update_critic", "update_actor")
"""``timing_s/*`` phases in the order ``RayPPOTrainer.train_step`` runs them."""


def watched_device(gpu: str | None = None) -> str:
    """The card a run's monitors watch: its lane's GPU, else the first of ``CUDA_VISIBLE_DEVICES`` (the host's
    numbering, as NVML and ``nvidia-smi`` use), else 0."""
    return gpu if gpu is not None else os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"


class MemorySampler:
    """Device memory in use (NVML, bytes), sampled every ``interval`` s on a thread: ``samples`` of (time, used).

    The device is ``device`` (a lane's GPU), else the first of ``CUDA_VISIBLE_DEVICES`` (NVML numbers GPUs as the
    host does). Sampling is not free:
    every 10 ms it slowed the colocated SGLang engine's decode by about a third (``benchmarks.gpu.sglang_gap``), so
    the timed runs sample every ``--memory-sample-ms`` (0: not at all)."""

    def __init__(self, interval: float = 0.01, device: str | None = None) -> None:
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        first = watched_device(device)
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(int(first) if first.isdigit() else 0)
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        # how long each NVML query took (a slow one may hold up the engine's own driver calls)
        self.query_s: list[float] = []
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._sampling = threading.Lock()  # held while a sample is taken: pausing waits out the one in flight
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._sampling:
                if not self._paused.is_set():
                    begin = time.perf_counter()
                    used = self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used
                    now = time.perf_counter()
                    self.samples.append((now, int(used)))
                    self.query_s.append(now - begin)
            time.sleep(self.interval)

    @contextlib.contextmanager
    def paused(self):
        """No NVML query inside the block (a run's phases then have no peaks): the A/B of a run with and without
        the sampler beside it in one lane (``bench_gpu_grpo``'s ``nosample...`` variants)."""
        self._paused.set()
        with self._sampling:  # a sample begun before the pause lands now, not inside the block
            pass
        try:
            yield
        finally:
            self._paused.clear()

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def query_ms(self, first: int = 0) -> dict[str, float]:
        """Median and longest NVML query (ms) of the queries from index ``first`` on ({} where none)."""
        times = sorted(self.query_s[first:])
        if not times:
            return {}
        return {"nvml_query_ms_p50": 1000 * times[len(times) // 2], "nvml_query_ms_max": 1000 * times[-1]}

    def peak_gib(self, start: float, end: float) -> float | None:
        values = [used for t, used in self.samples if start <= t <= end]
        return max(values) / 2**30 if values else None


def phase_window(record: dict, end: float, phase: str) -> tuple[float, float] | None:
    """(start, end) of ``phase`` in one step that ended at ``end`` (phases laid end to end from the step's start,
    in trainer order); None when the step did not time it."""
    cursor = end - float(record.get("timing_s/step", 0.0))
    for name in PHASES:
        seconds = record.get(f"timing_s/{name}")
        if seconds is None:
            continue
        if name == phase:
            return cursor, cursor + float(seconds)
        cursor += float(seconds)
    return None


def _phase_peaks(record: dict, end: float, sampler: MemorySampler) -> dict[str, float]:
    """Peak device memory (GiB) of each timed phase of one step that ended at ``end`` (phases laid end to end from
    the step's start, in trainer order)."""
    peaks = {}
    for phase in PHASES:
        window = phase_window(record, end, phase)
        peak = sampler.peak_gib(*window) if window is not None else None
        if peak is not None:
            peaks[f"peak_gib/{phase}"] = peak
    step_peak = sampler.peak_gib(end - float(record.get("timing_s/step", 0.0)), end)
    if step_peak is not None:
        peaks["peak_gib/step"] = step_peak
    return peaks


TOP_LINES = 40
"""Lines of each ``top`` frame kept: the summary and the busiest processes."""


CPU_MONITORS = ("cpu", "probe")
"""The monitors that need no ``nvidia-smi`` (all a CPU machine runs)."""
MONITORS = ("pmon", "dmon", "top", *CPU_MONITORS)


def _start_gpu_monitors(
    out: Path, name: str, device: str, tools: tuple[str, ...] | None = None
) -> list[subprocess.Popen]:
    """Once a second, into ``<name>.{pmon,dmon,top}.log`` (kept in logs.tar.gz): ``nvidia-smi pmon`` (SM and
    memory-bandwidth use per process on GPU ``device``: does the training process's context run kernels while the
    engine generates?), ``dmon`` (power, clocks, use) and ``top`` (the busiest processes with their command lines:
    is a CPU-bound engine scheduler sharing its cores?). Once a second costs nothing measurable, unlike the 10 ms
    memory sampler. Every 0.25 s, :mod:`benchmarks.gpu.cpu_monitor` records each thread's CPU time and the host's
    steal into ``<name>.cpu.jsonl`` (:func:`cpu_during_generation` reads it), and every 0.05 s
    :mod:`benchmarks.gpu.cpu_probe` times a fixed Python workload on the next vCPU into ``<name>.probe.jsonl`` (how
    fast the host's cores ran). Each monitor is its own process group (:func:`_stop_group`). ``tools`` picks some of
    them (default: all of them, only :data:`CPU_MONITORS` where there is no ``nvidia-smi``)."""
    if tools is None:
        tools = MONITORS if shutil.which("nvidia-smi") else CPU_MONITORS
    commands = {
        "pmon": ["nvidia-smi", "pmon", "-i", device, "-d", "1", "-s", "um", "-o", "T"],
        "dmon": ["nvidia-smi", "dmon", "-i", device, "-d", "1", "-s", "pucm", "-o", "T"],
        "top": ["bash", "-c", f"top -b -d 1 -c -w 250 | awk '/^top -/{{n=0}} n++<{TOP_LINES}'"],
        "cpu": [
            sys.executable,
            "-m",
            "benchmarks.gpu.cpu_monitor",
            "record",
            "--out",
            str(out / f"{name}.cpu.jsonl"),
            "--interval",
            "0.25",
        ],  # fmt: skip
        "probe": [sys.executable, "-m", "benchmarks.gpu.cpu_probe", "record", "--out", f"{out}/{name}.probe.jsonl"],
    }
    monitors = []
    for tool, command in commands.items():
        if tool not in tools:
            continue
        sink = open(out / f"{name}.{tool}.log", "w")  # noqa: SIM115 - closed with the process
        monitors.append(subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True))
        sink.close()  # the child holds its own descriptor
    return monitors


def _stop_group(process: subprocess.Popen) -> None:
    """Stop ``process`` and everything in its process group (``top | awk`` is two processes under bash)."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def cpu_during_generation(
    out: Path, name: str, records: list[dict], arrivals: dict[int, float], sequences: int | None = None
) -> list[dict]:
    """Print who used the CPUs during the generation phases of steps 2 and later of run ``name`` (from its
    ``<name>.cpu.jsonl``; ``arrivals[i]`` is when record ``i``'s step ended, on this process's ``perf_counter``),
    against the rest of the run; then each of those steps' generation with what ran during it
    (:mod:`benchmarks.gpu.generation_context`; ``sequences`` per step turn the mean response length into
    tokens/s of the rollout's own call). Returns those generations' rows (none without ``sequences``)."""
    from benchmarks.gpu.cpu_monitor import print_summary, summarize
    from benchmarks.gpu.generation_context import per_generation, print_rows

    path = out / f"{name}.cpu.jsonl"
    steps = [
        (record, window)
        for index, record in enumerate(records)
        if index in arrivals and record.get("step", 0) >= 2
        if (window := phase_window(record, arrivals[index], "gen")) is not None
    ]
    windows = [window for _, window in steps]
    if not path.exists() or not windows:
        return []
    print(f"[{name}] CPU use during generation (steps 2+, busy) and elsewhere (other):", flush=True)
    print_summary(summarize(path, windows=windows, top=15))
    timed = [(r, w) for r, w in steps if "response_length/mean" in r and "timing_s/rollout_call" in r]
    if sequences and timed:
        result = {
            "all_tokens_per_s": [r["response_length/mean"] * sequences / r["timing_s/rollout_call"] for r, _ in timed],
            "windows": [w for _, w in timed],
        }
        rows = per_generation(out, name, result)
        print_rows(f"{name} steps 2+", rows)
        return rows
    return []
