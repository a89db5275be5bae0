"""The GPU benchmark's scheduler pinning: the CPU-list parser, and a Pinner moving a real scheduler-titled process (and
the threads it starts later) onto the reserved vCPU while its parent's other children keep their affinity."""

import os
import subprocess
import sys
import time

import pytest

from benchmarks.gpu import affinity

# a parent that starts a "scheduler" (titled as SGLang's, by bash's exec -a) and a sibling worker; the scheduler
# starts a second thread after a while, as SGLang's does when it begins serving
THREADS = "\n".join(
    [
        "import threading, time",
        "time.sleep(1.0)",
        "threading.Thread(target=time.sleep, args=(4,)).start()",
        "time.sleep(4)",
    ]
)
PARENT = f"""
import os, subprocess, sys, time
command = 'exec -a "sglang::scheduler test" {sys.executable} -c "$CODE"'
scheduler = subprocess.Popen(["bash", "-c", command], env=dict(os.environ, CODE={THREADS!r}))
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
print(scheduler.pid, worker.pid, flush=True)
scheduler.wait(); worker.wait()
"""


def test_cpu_lists_parse_as_the_kernel_writes_them():
    assert affinity._parse_list("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    assert affinity._parse_list("5") == {5}
    assert affinity._parse_list("") == set()


def test_sibling_groups_cover_each_allowed_vcpu_once():
    groups = affinity.sibling_groups()
    flat = [cpu for group in groups for cpu in group]
    assert sorted(flat) == sorted(os.sched_getaffinity(0))
    assert groups == sorted(groups)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two vCPUs")
def test_pinner_moves_every_scheduler_thread_and_nothing_else():
    cpu = max(os.sched_getaffinity(0))
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    scheduler_pid, worker_pid = (int(x) for x in parent.stdout.readline().split())
    pinner = affinity.Pinner(parent.pid, cpu, interval=0.1).start()
    try:
        time.sleep(2.0)  # past the scheduler's second thread
        tids = [int(t) for t in os.listdir(f"/proc/{scheduler_pid}/task")]
        assert len(tids) == 2
        assert all(os.sched_getaffinity(tid) == {cpu} for tid in tids)
        assert os.sched_getaffinity(worker_pid) == os.sched_getaffinity(0)  # untouched
        assert pinner.pinned == {scheduler_pid: 2}
    finally:
        pinner.stop()
        parent.kill()
        parent.wait()


def test_descendants_walk_the_whole_tree():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        scheduler_pid, worker_pid = (int(x) for x in parent.stdout.readline().split())
        found = affinity.descendants(parent.pid)
        assert {scheduler_pid, worker_pid} <= set(found)
        assert parent.pid not in found
    finally:
        parent.kill()
        parent.wait()
