"""The host-speed probe: its workload, a real recording, and each window's median."""

import json
import os
import signal

from benchmarks.gpu.cpu_probe import WORK, probe_rows, record, workload


def test_the_workload_computes_what_it_is_meant_to():
    # i * i mod 7 over one period of 7 is 0 1 4 2 2 4 1 (sum 14); WORK = 7 * 2857 + 1 and the extra i = 19999 is 0 mod 7
    assert WORK == 7 * 2857 + 1
    assert workload() == 2857 * 14
    assert workload(9) == 14 + 0 + 1


def test_record_times_the_workload_on_each_given_vcpu_in_turn(tmp_path):
    allowed = sorted(os.sched_getaffinity(0))
    cpus = (allowed * 2)[:2]
    handler = signal.getsignal(signal.SIGINT)
    out = tmp_path / "run.probe.jsonl"
    record(out, interval=0.02, stop_after=0.3, cpus=cpus)
    assert sorted(os.sched_getaffinity(0)) == allowed  # the caller's affinity and handlers are back
    assert signal.getsignal(signal.SIGINT) is handler
    samples = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(samples) >= 3
    assert [s["cpu"] for s in samples] == [cpus[i % 2] for i in range(len(samples))]
    assert all(s["ms"] > 0 for s in samples)
    assert [s["t"] for s in samples] == sorted(s["t"] for s in samples)


def test_probe_rows_take_the_median_of_the_samples_that_ended_in_each_window(tmp_path):
    path = tmp_path / "run.probe.jsonl"
    lines = [{"t": 1.0, "ms": 2.0, "cpu": 0}, {"t": 1.4, "ms": 6.0, "cpu": 1}, {"t": 3.0, "ms": 3.0, "cpu": 0}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"t": 4.0, "ms"')  # a cut last line
    both, last, empty = probe_rows(path, [(0.5, 1.5), (2.5, 4.5), (1.5, 2.5)])
    assert both == {"probe_ms": 4.0, "probe_samples": 2}
    assert last == {"probe_ms": 3.0, "probe_samples": 1}
    assert empty == {}
