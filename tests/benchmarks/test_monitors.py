"""The CPU-side monitors that run beside a GPU benchmark, started and stopped for real."""

import json
import time

from benchmarks.gpu.cpu_monitor import load
from benchmarks.gpu.monitors import _start_gpu_monitors, _stop_group


def test_the_cpu_monitor_and_the_probe_record_until_stopped(tmp_path):
    monitors = _start_gpu_monitors(tmp_path, "run", "0", ("cpu", "probe"))
    assert len(monitors) == 2
    time.sleep(4.0)  # the interpreters start, then the monitor samples every 0.25 s and the probe every 0.05 s
    for monitor in monitors:
        _stop_group(monitor)
    assert all(monitor.returncode is not None for monitor in monitors)
    _, samples = load(tmp_path / "run.cpu.jsonl")
    assert samples and all("steal" in sample["host"] for sample in samples)
    probes = [json.loads(line) for line in (tmp_path / "run.probe.jsonl").read_text().splitlines()]
    assert len(probes) >= 3 and all(p["ms"] > 0 for p in probes)
