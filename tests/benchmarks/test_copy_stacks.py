"""The update benchmark's copy attribution: copy ops grouped by the Python frames that called them."""

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.copy_stacks import copy_stack_table


def _transpose_copy(a):
    return a.t().contiguous()


def _two_copies(a):
    return _transpose_copy(a), a.clone(), a.clone()


def test_copies_are_grouped_by_their_callers_and_nested_copies_count_once():
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        _two_copies(torch.randn(64, 64))
    table = copy_stack_table(prof.events(), rows=10, depth=2).splitlines()
    # contiguous and two clones: clone's inner aten::copy_ is not counted a second time
    assert table[0].endswith("in 3 copy ops")
    clone = table.index("-- aten::clone x2: 0.00 ms device")
    assert table[clone + 1].endswith(": _two_copies")
    contiguous = table.index("-- aten::contiguous x1: 0.00 ms device")
    assert table[contiguous + 1].endswith(": _transpose_copy")
    assert table[contiguous + 2].endswith(": _two_copies")
