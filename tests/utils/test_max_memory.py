"""``perf/max_memory_allocated_gb`` is in GiB, as verl reports it (the roles' copy said GB, 7% larger), and on CPU
the process's peak resident set size."""

import resource

import torch

from verl.utils.profiler import max_memory_allocated_gb


def test_the_peak_is_in_gib_and_on_cpu_the_peak_resident_set():
    if torch.cuda.is_available():
        assert max_memory_allocated_gb() == torch.cuda.max_memory_allocated() / 2**30
        return
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30
    value = max_memory_allocated_gb()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30
    assert before <= value <= after and value > 0.01  # a Python process with torch loaded holds far more than 10 MiB
