"""py-spy helpers of the GPU benchmarks: attaching by process title below a root, and the raw-file summary."""

import os
import subprocess
import sys
import time

import pytest

from benchmarks.gpu import pyspy

FAKE_PY_SPY = """#!/usr/bin/env bash
# stands in for py-spy record: waits for --pid to exit, then writes one raw stack naming it to --output
while [ $# -gt 0 ]; do case $1 in --pid) pid=$2; shift;; --output) out=$2; shift;; esac; shift; done
while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
echo "main (x.py:1);loop (x.py:2) 7" > "$out"
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_attaches_once_to_each_titled_process_below_the_root_and_nothing_else(tmp_path):
    fake = tmp_path / "py-spy"
    fake.write_text(FAKE_PY_SPY)
    fake.chmod(0o755)
    # the root starts a "scheduler" (a grandchild, as Ray's worker spawns SGLang's) and an untitled sleeper
    root = subprocess.Popen(
        [
            "bash",
            "-c",
            "(exec -a sglang::scheduler sleep 1.5) & (bash -c 'exec -a sglang::scheduler sleep 1.5') & "
            "sleep 1.5 & wait",
        ]
    )
    outsider = subprocess.Popen(["bash", "-c", "exec -a sglang::scheduler sleep 1.5"])  # not below the root
    attacher = pyspy.Attacher(str(fake), root.pid, tmp_path / "run", poll_s=0.1).start()
    time.sleep(1.0)
    titled = [pid for pid in pyspy.descendants(root.pid) if pyspy.process_title(pid).startswith("sglang::scheduler")]
    root.wait()
    outsider.wait()
    attacher.stop(grace=10)
    assert len(titled) == 2 and sorted(attacher.recorders) == sorted(titled)
    files = sorted(tmp_path.glob("run.sglang_scheduler.*.pyspy.txt"))
    assert [int(f.name.split(".")[2]) for f in files] == sorted(titled)
    assert str(outsider.pid) not in " ".join(f.name for f in files)
    assert pyspy.load_raw(files[0]) == {"": {("main (x.py:1)", "loop (x.py:2)"): 7}}


def test_summary_counts_self_and_inclusive_shares_within_the_loop(tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text(
        'process 1:"sglang::scheduler";main (s.py:1);event_loop (s.py:5);run_batch (s.py:9) 6\n'
        'process 1:"sglang::scheduler";main (s.py:1);event_loop (s.py:5);sample (s.py:12) 2\n'
        'process 1:"sglang::scheduler";main (s.py:1);import (s.py:3) 10\n'  # start-up: outside the loop
        'process 2:"ray::WorkerDict";main (w.py:1);generate (w.py:4) 50\n'
    )
    text = pyspy.summarize(raw, process="sglang::scheduler").splitlines()
    assert text[0].endswith("8 samples within 'event_loop' of 18")
    self_part = text[text.index("-- self") + 1 : text.index("-- inclusive")]
    assert self_part == [" 75.0%  run_batch (s.py:9)", " 25.0%  sample (s.py:12)"]
    inclusive = dict(line.split("  ", 1)[::-1] for line in text[text.index("-- inclusive") + 1 :])
    assert inclusive["event_loop (s.py:5)"].strip() == "100.0%"
    assert inclusive["main (s.py:1)"].strip() == "100.0%"
    assert "no process matching" in pyspy.summarize(raw, process="detokenizer")
    assert os.path.exists(raw)
