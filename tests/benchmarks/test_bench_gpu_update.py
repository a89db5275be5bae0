"""The update benchmark's copy attribution: copy ops grouped by the Python frames that called them."""

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.bench_gpu_update import copy_stack_table


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


def _row(shape, variant, step_s):
    return {
        "shape": shape,
        "variant": variant,
        "step_s": step_s,
        "tokens_per_s": 65536 / step_s,
        "mfu_update": 0.4,
        "mfu_infer": 0.3,
        "device": "NVIDIA H200",
        "tokens": 65536,
    }


def test_summary_table_speedup_is_against_the_baseline_of_the_same_shape_and_dash_without_one():
    from benchmarks.bench_gpu_update import BASELINE, summary_table

    long_variant = "varlen+logits+compile+fusedadam"
    rows = [_row("qwen", BASELINE, 1.0), _row("qwen", long_variant, 0.5), _row("smol", long_variant, 0.25)]
    header, *body, footer = summary_table(rows).splitlines()
    # 1.0 s / 0.5 s on the same shape; smol has no baseline row, so no ratio (session 24 printed "nanx")
    assert body[0].split()[-1] == "1.00x"
    assert body[1].split()[-1] == "2.00x"
    assert body[2].split()[-1] == "-"
    # the longest variant name sets the column, so every row's s/step starts where the header's does
    column = header.index("s/step") + len("s/step")
    assert [line[column - 5 : column] for line in body] == ["1.000", "0.500", "0.250"]
    assert footer.startswith("device: NVIDIA H200; tokens/step 65536")
