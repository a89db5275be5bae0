"""The device-gap attribution of issue 15's update profile, on a hand-worked timeline and on a real CPU profile."""

from types import SimpleNamespace

import pytest

from benchmarks.gpu.device_gaps import NO_HOST_OP, device_gaps, gap_table


def _event(name, start, end, kind="cpu_op", parent=None, thread=1):
    device = "DeviceType.CPU" if kind in ("cpu_op", "user_annotation", "cuda_runtime") else "DeviceType.CUDA"
    return SimpleNamespace(
        name=name,
        time_range=SimpleNamespace(start=start, end=end),
        device_type=device,
        activity_type=kind,
        is_async=False,
        cpu_parent=parent,
        thread=thread,
    )


def _timeline():
    """Host (thread 1): ``update`` 0-100 holds ``aten::item`` 18-31 (holding ``cudaStreamSynchronize`` 19-30) and
    ``aten::mm`` 60-62; thread 2: ``backward`` 70-90. Device: kernels 0-10, 5-20 (overlapping), 30-40, 41-50,
    80-95, a memcpy 95-96; a ``gpu_user_annotation`` 0-96 that must not count as work."""
    update = _event("update", 0, 100, "user_annotation")
    item = _event("aten::item", 18, 31, parent=update)
    sync = _event("cudaStreamSynchronize", 19, 30, "cuda_runtime", parent=item)
    mm = _event("aten::mm", 60, 62, parent=update)
    backward = _event("backward", 70, 90, thread=2)
    kernels = [
        _event("k1", 0, 10, "kernel"),
        _event("k2", 5, 20, "kernel"),
        _event("k3", 30, 40, "kernel"),
        _event("k4", 41, 50, "kernel"),
        _event("k5", 80, 95, "kernel"),
        _event("copy", 95, 96, "gpu_memcpy"),
        _event("annotation", 0, 96, "gpu_user_annotation"),
    ]
    return [update, item, sync, mm, backward, *kernels]


def test_gaps_are_put_down_to_the_deepest_host_op_at_their_middle():
    report = device_gaps(_timeline(), min_gap_us=5)
    # busy: 0-20, 30-40, 41-50, 80-96 = 20 + 10 + 9 + 16; window 0-96
    assert report.busy_us == pytest.approx(55)
    assert report.window_us == pytest.approx(96)
    # gaps >= 5: 20-30 (middle 25: update > item > sync) and 50-80 (middle 65: update alone; backward starts at 70);
    # 40-41 is below the threshold
    assert report.gaps == 2
    assert report.gap_us == pytest.approx(40)
    assert report.by_label == {("update", "cudaStreamSynchronize"): (10, 1), ("update", "update"): (30, 1)}


def test_a_gap_with_no_host_op_at_its_middle_is_python_and_the_deepest_thread_wins():
    events = _timeline()
    # host ops end at 100; a kernel at 120-130 leaves the gap 96-120 with its middle (108) outside every op
    events.append(_event("k6", 120, 130, "kernel"))
    report = device_gaps(events, min_gap_us=5)
    assert report.by_label[(NO_HOST_OP, NO_HOST_OP)] == (24, 1)
    # a gap at 84-86 is covered by thread 1's `update` (depth 1) and thread 2's backward > its child (depth 2)
    events = _timeline()
    backward = events[4]
    events.append(_event("evaluate_function: MmBackward0", 83, 87, parent=backward, thread=2))
    events[9] = _event("k5", 80, 84, "kernel")
    events.append(_event("k5b", 86, 95, "kernel"))
    report = device_gaps(events, min_gap_us=1)
    assert report.by_label[("backward", "evaluate_function: MmBackward0")] == (2, 1)


def test_the_table_ranks_labels_by_idle_time():
    lines = gap_table(device_gaps(_timeline(), min_gap_us=5)).splitlines()
    assert lines[0].startswith("DEVICE GAPS busy 0.1 ms of a 0.1 ms window")
    assert "2 gaps" in lines[0]
    assert lines[1].split()[-3:] == ["update", ">", "update"]
    assert lines[2].split()[-3:] == ["update", ">", "cudaStreamSynchronize"]


def test_no_device_work_gives_an_empty_report():
    report = device_gaps([_event("aten::mm", 0, 5)])
    assert (report.window_us, report.busy_us, report.gaps, report.by_label) == (0.0, 0.0, 0, {})


def test_a_real_cpu_profile_parses_its_host_tree():
    """The profiler's own events (no device here): every op is found under the annotation that holds it."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("step"):
            x = torch.randn(64, 64)
            (x @ x).sum().item()
    events = list(prof.events())
    from benchmarks.gpu.device_gaps import _HostTree

    tree = _HostTree(events)
    item = next(e for e in events if e.name == "aten::_local_scalar_dense")
    chain = tree.chain_at((item.time_range.start + item.time_range.end) / 2)
    assert [e.name for e in chain][0] == "step"
    assert chain[-1].name == "aten::_local_scalar_dense"
    assert device_gaps(events).gaps == 0
