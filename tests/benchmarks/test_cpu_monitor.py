"""The per-thread CPU monitor of the GPU benchmarks: samples split by whether the engine's scheduler is busy."""

import json
import statistics
import subprocess
import sys
import time

import pytest

from benchmarks.gpu import cpu_monitor

SPIN = "import sys, time\nend = time.time() + float(sys.argv[1])\nwhile time.time() < end:\n    pass\n"
# the same spin spent in the kernel: every os.stat is a system call (time.time reads the vDSO, no call)
SYSCALLS = "import os, sys, time\nend = time.time() + float(sys.argv[1])\nwhile time.time() < end:\n    os.stat('/')\n"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_busy_samples_are_those_where_the_scheduler_spins_and_name_what_ran_beside_it(tmp_path):
    out = tmp_path / "cpu.jsonl"
    record = ["record", "--out", str(out), "--interval", "0.2", "--match", "cpu-test-"]
    monitor = subprocess.Popen([sys.executable, "-m", "benchmarks.gpu.cpu_monitor", *record])
    time.sleep(0.6)
    # bash's exec -a titles the process, as SGLang's scheduler titles itself "sglang::scheduler"
    scheduler = subprocess.Popen(
        ["bash", "-c", f"exec -a 'sglang::scheduler cpu-test-s' {sys.executable} -c '{SPIN}' 2"]
    )
    hog = subprocess.Popen(["bash", "-c", f"exec -a cpu-test-hog {sys.executable} -c '{SPIN}' 2"])
    scheduler.wait()
    hog.wait()
    idle = subprocess.Popen(["bash", "-c", "exec -a cpu-test-idle sleep 1.2"])
    idle.wait()
    monitor.terminate()
    assert monitor.wait(timeout=10) == 0

    lines = [json.loads(line) for line in out.read_text().splitlines()]
    names = {k: v for line in lines if "names" in line for k, v in line["names"].items()}
    assert any(process.startswith("sglang::scheduler") for process, _ in names.values())
    assert not any("pytest" in process for process, _ in names.values())  # only --match'ed processes are watched

    result = cpu_monitor.summarize(out, top=10)
    # the scheduler spun for 2 s out of ~3.8 s sampled every 0.2 s: roughly 10 busy samples, the rest not
    assert 4 <= result["busy_samples"] <= 12
    assert result["other_samples"] >= 4
    busy = {name.split(" ")[1]: cores for cores, name in result["busy"]["processes"]}  # "<pid> <command>"
    assert busy["cpu-test-hog"] > 0.3  # it spun during the same two seconds
    assert "cpu-test-idle" not in busy
    assert all(set(s["host"]) == set(cpu_monitor.HOST_FIELDS) for s in lines if "host" in s)


def test_generation_windows_come_from_step_end_times_and_phase_durations(tmp_path, capsys):
    from benchmarks.gpu.monitors import cpu_during_generation, phase_window

    # step 2 ended at t=110: it began at 110 - 10 = 100, gen took 100..102, reward 102..103, then update_actor
    record = {"step": 2, "timing_s/step": 10.0, "timing_s/gen": 2.0, "timing_s/reward": 1.0, "timing_s/update_actor": 5}
    assert phase_window(record, 110.0, "gen") == (100.0, 102.0)
    assert phase_window(record, 110.0, "reward") == (102.0, 103.0)
    assert phase_window(record, 110.0, "update_actor") == (103.0, 108.0)
    assert phase_window(record, 110.0, "ref") is None

    host = dict.fromkeys(cpu_monitor.HOST_FIELDS, 0.0)
    lines = [{"names": {"1/1": ["sglang::scheduler", "python"], "2/2": ["ray::TaskRunner", "python"]}}]
    for t in (99.5, 100.5, 101.5, 104.0):  # two samples inside step 2's generation, two outside
        in_gen = 100 <= t <= 102
        threads = {"1/1": [1.0, 0], "2/2": [3.0, 1]} if in_gen else {"2/2": [0.5, 1]}
        lines.append({"t": t, "dt": 0.5, "host": {**host, "steal": 2.0 if in_gen else 0.0}, "threads": threads})
    (tmp_path / "run.cpu.jsonl").write_text("\n".join(json.dumps(line) for line in lines))
    step1 = {"step": 1, "timing_s/step": 10.0, "timing_s/gen": 9.0}  # step 1 (compiles, warms up) is left out
    cpu_during_generation(tmp_path, "run", [step1, record], {0: 99.6, 1: 110.0})

    printed = capsys.readouterr().out
    busy, other = printed.split("-- other")
    assert "busy in 2, not in 2" in printed
    assert "steal 2.0" in busy and "3.00  2 ray::TaskRunner" in busy and "1.00  1 sglang::scheduler" in busy
    assert "0.50  2 ray::TaskRunner" in other and "sglang" not in other


def test_each_loop_step_generation_gets_its_rate_and_engine_thread(tmp_path, capsys):
    from benchmarks.gpu.monitors import cpu_during_generation

    host = dict.fromkeys(cpu_monitor.HOST_FIELDS, 0.0)
    lines = [{"names": {"1/1": ["sglang::scheduler", "python"], "2/2": ["ray::WorkerDict", "python"]}}]
    # step 2's generation 100..102 (the scheduler on vCPU 0 with the worker beside it), step 3's 199..200
    lines.append({"t": 101.0, "dt": 0.5, "host": host, "threads": {"1/1": [0.9, 0], "2/2": [0.5, 0]}})
    lines.append({"t": 199.5, "dt": 0.5, "host": host, "threads": {"1/1": [0.7, 3]}})
    (tmp_path / "run.cpu.jsonl").write_text("\n".join(json.dumps(line) for line in lines))
    step2 = {"step": 2, "timing_s/step": 3.0, "timing_s/gen": 2.0, "timing_s/rollout_call": 1.6,
             "response_length/mean": 200.0}  # fmt: skip
    step3 = {"step": 3, "timing_s/step": 3.0, "timing_s/gen": 1.0, "timing_s/rollout_call": 0.4,
             "response_length/mean": 100.0}  # fmt: skip
    returned = cpu_during_generation(tmp_path, "run", [step2, step3], {0: 103.0, 1: 202.0}, sequences=8)
    assert [row["tokens_per_s"] for row in returned] == [1000.0, 2000.0]  # the printed rows, for the table

    rows = capsys.readouterr().out.split("[run steps 2+] generations, slowest first")[1].splitlines()[1:3]
    # 200 tokens x 8 sequences in the rollout's 1.6 s call = 1,000 tok/s, slower than step 3's 100 x 8 / 0.4
    assert rows[0].split("|")[0].strip() == "1,000" and "0.9 @ [0]" in rows[0]
    assert "sglang::scheduler" not in rows[0].split("|")[3] and "ray::WorkerDict | python x1" in rows[0]
    assert rows[1].split("|")[0].strip() == "2,000" and "0.7 @ [3]" in rows[1] and "| 0 | - |" in rows[1]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_each_thread_sample_splits_off_the_time_spent_in_system_calls(tmp_path):
    """The kernel's own accounting (``/proc/<pid>/task/<tid>/stat`` utime and stime) is the reference: a loop of
    ``os.stat`` calls spends most of its core in the kernel, a pure Python loop almost none of it."""
    out = tmp_path / "cpu.jsonl"
    record = ["record", "--out", str(out), "--interval", "0.2", "--match", "cpu-test-"]
    monitor = subprocess.Popen([sys.executable, "-m", "benchmarks.gpu.cpu_monitor", *record])
    time.sleep(0.6)
    user = subprocess.Popen(["bash", "-c", f"exec -a cpu-test-user {sys.executable} -c '{SPIN}' 2"])
    kernel = subprocess.Popen(["bash", "-c", f'exec -a cpu-test-kernel {sys.executable} -c "{SYSCALLS}" 2'])
    user.wait()
    kernel.wait()
    monitor.terminate()
    assert monitor.wait(timeout=10) == 0

    names, samples = cpu_monitor.load(out)
    share: dict[str, list[float]] = {"cpu-test-user": [], "cpu-test-kernel": []}
    for sample in samples:
        for key, (cores, _, system) in sample["threads"].items():
            process = names[key][0].split(" ")[0]  # the command line, shortened: its first word
            if process in share and cores >= 0.2:
                share[process].append(system / cores)
    assert len(share["cpu-test-user"]) >= 3 and len(share["cpu-test-kernel"]) >= 3
    assert max(share["cpu-test-user"]) < 0.2
    assert statistics.median(share["cpu-test-kernel"]) > 0.3
