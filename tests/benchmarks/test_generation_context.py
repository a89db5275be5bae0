"""Each timed generation placed next to what the machine did during it: hand-built monitor files."""

import json
import math
from datetime import datetime

import pytest

from benchmarks.gpu.cpu_monitor import HOST_FIELDS
from benchmarks.gpu.generation_context import (
    cpu_rows,
    dmon_rows,
    host_matched_ratio,
    per_generation,
    print_rows,
    rank_correlation,
)

GROUPS = [[0, 1], [2, 3]]  # two physical cores, two hyperthreads each
NAMES = {"10/10": ["sglang::scheduler", "python"], "20/21": ["ray::Worker", "loader"], "30/30": ["top", "top"]}


def _write_cpu(path, samples):
    lines = [{"names": NAMES}]
    for t, threads in samples:
        host = {field: 0.0 for field in HOST_FIELDS} | {"steal": 0.5}
        lines.append({"t": t, "dt": 0.25, "host": host, "threads": threads})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_each_window_names_the_engine_thread_and_what_shared_its_core(tmp_path):
    path = tmp_path / "run.cpu.jsonl"
    _write_cpu(
        path,
        [
            # window 1 (10.0-10.6): the scheduler on vCPU 0, the loader busy on its sibling vCPU 1, then on vCPU 3
            (10.25, {"10/10": [0.9, 0], "20/21": [0.8, 1], "30/30": [0.05, 2]}),
            (10.5, {"10/10": [0.9, 0], "20/21": [0.7, 3]}),
            # between the windows: nothing counts
            (11.0, {"20/21": [1.0, 0]}),
            # window 2 (12.0-12.3): the scheduler alone on vCPU 2
            (12.25, {"10/10": [0.6, 2], "30/30": [0.1, 3]}),
        ],
    )
    first, second, empty = cpu_rows(path, [(10.0, 10.6), (12.0, 12.3), (13.0, 14.0)], groups=GROUPS)

    assert first["samples"] == 2 and first["engine_thread"] == "sglang::scheduler | python"
    assert first["engine_cores"] == 0.9 and first["engine_cpus"] == [0]
    assert first["sharing"] == {"ray::Worker | loader": 1}  # only the sample where it ran on vCPU 0's sibling
    assert first["busy_threads"] == 1  # top's 0.05 of a core is below the threshold
    assert first["steal_cores"] == 0.5

    assert second["engine_cpus"] == [2] and second["engine_cores"] == 0.6
    assert second["sharing"] == {} and second["busy_threads"] == 0
    assert empty == {"samples": 0}
    assert "engine_system_cores" not in first  # files before session 23 record no system part


def test_a_window_whose_samples_saw_no_watched_thread_gets_only_its_steal(tmp_path):
    path = tmp_path / "run.cpu.jsonl"
    _write_cpu(path, [(10.25, {}), (10.5, {})])  # the monitor ran but nothing it watches was busy yet
    assert cpu_rows(path, [(10.0, 10.6)], groups=GROUPS) == [{"samples": 2, "steal_cores": 0.5}]


def test_the_engine_threads_system_part_is_its_mean_over_the_window(tmp_path):
    path = tmp_path / "run.cpu.jsonl"
    # [cores, vCPU, system cores]: 0.9 with 0.3 in the kernel, then 0.9 with 0.5 (mean 0.4)
    _write_cpu(path, [(10.25, {"10/10": [0.9, 0, 0.3], "30/30": [0.05, 2, 0.05]}), (10.5, {"10/10": [0.9, 0, 0.5]})])
    (row,) = cpu_rows(path, [(10.0, 10.6)], groups=GROUPS)
    assert row["engine_cores"] == 0.9 and row["engine_system_cores"] == 0.4


def test_dmon_lines_inside_a_wall_window_give_its_clock_and_power(tmp_path):
    path = tmp_path / "run.dmon.log"
    path.write_text(
        "#Time        gpu    pwr  gtemp  mtemp     sm    mem   mclk   pclk\n"
        "#HH:MM:SS    Idx      W      C      C      %      %    MHz    MHz\n"
        " 02:06:54      0     90     30     35      0      0   3201    345\n"
        " 02:06:55      0    300     31     36     80     20   3201   1980\n"
        " 02:06:56      0    320     32     37     85     22   3201   1700\n"
        " 02:06:58      0    100     30     35      0      0   3201    345\n"
    )
    day = datetime(2026, 11, 29)

    def at(second: float) -> float:
        return day.replace(hour=2, minute=6).timestamp() + second

    window = (at(55), at(56))
    inside, early, gap = dmon_rows(path, [window, (at(54.5), at(54.5)), (at(57.2), at(57.5))])
    # medians of 02:06:55 and 02:06:56
    assert inside == {"sm_clock_mhz": 1840.0, "power_w": 310.0, "sm_percent": 82.5}
    assert early == {"sm_clock_mhz": 345.0, "power_w": 90.0, "sm_percent": 0.0}  # 02:06:54's line covers 54.0-55.0
    # no line for 02:06:57: the last one before it
    assert gap == {"sm_clock_mhz": 1700.0, "power_w": 320.0, "sm_percent": 85.0}
    assert dmon_rows(tmp_path / "missing.log", [window]) == [{}]


def test_per_generation_pairs_each_rate_with_its_window(tmp_path):
    _write_cpu(tmp_path / "v.cpu.jsonl", [(1.5, {"10/10": [1.0, 0]}), (2.5, {"10/10": [0.5, 1]})])
    result = {"all_tokens_per_s": [100.0, 50.0], "windows": [[1.0, 2.0], [2.0, 3.0]]}
    rows = per_generation(tmp_path, "v", result)
    assert [r["tokens_per_s"] for r in rows] == [100.0, 50.0]
    assert [r["engine_cores"] for r in rows] == [1.0, 0.5]


def test_per_generation_adds_the_probes_median_where_its_file_exists(tmp_path):
    probe = [{"t": 1.2, "ms": 2.0, "cpu": 0}, {"t": 1.5, "ms": 4.0, "cpu": 1}, {"t": 1.8, "ms": 9.0, "cpu": 2}]
    (tmp_path / "v.probe.jsonl").write_text("".join(json.dumps(line) + "\n" for line in probe))
    result = {"all_tokens_per_s": [100.0, 50.0], "windows": [[1.0, 2.0], [2.0, 3.0]]}
    first, second = per_generation(tmp_path, "v", result)
    assert first["probe_ms"] == 4.0 and first["probe_samples"] == 3
    assert "probe_ms" not in second


def test_rank_correlation_against_hand_worked_values():
    assert rank_correlation([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert rank_correlation([1, 2, 3, 4], [9, 3, 2, 1]) == -1.0
    # ys' ranks with a tie: 1.5 1.5 3 4; Pearson of 1..4 with them: 4.5 / sqrt(5 * 4.5) = 0.9487
    assert abs(rank_correlation([1, 2, 3, 4], [1, 1, 2, 3]) - 4.5 / (5 * 4.5) ** 0.5) < 1e-12
    assert rank_correlation([1, 2], [1, 2]) is None  # too few pairs
    assert rank_correlation([1, 2, 3], [5, 5, 5]) is None  # a constant side has no ranking


def test_print_rows_ends_with_the_rates_rank_correlations(capsys):
    rows = [
        {"tokens_per_s": 80_000.0, "sm_percent": 75.0, "probe_ms": 2.0},
        {"tokens_per_s": 50_000.0, "sm_percent": 52.0, "probe_ms": 2.1},
        {"tokens_per_s": 60_000.0, "sm_percent": 60.0, "probe_ms": 1.9},
    ]
    print_rows("v", rows)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split("|")[-2:] == [" 52.0 ", " 2.1"]  # the slowest generation first: its SM % and probe ms
    # SM % rises with the rate (ranks 3 1 2 against 3 1 2); the probe's ranks 2 3 1 against 3 1 2: -0.5
    assert lines[-1] == "  rank correlation with tok/s: SM % +1.00, probe ms -0.50"


def _rows(pairs):
    return [{"tokens_per_s": rate, "probe_ms": probe} for probe, rate in pairs]


def test_host_matched_ratio_compares_two_runs_at_the_same_probe_time():
    # both runs make 100 (reference) and 80 tok/s per 1/ms of probe time: the second ran on a host twice as slow
    reference = _rows([(p, 100 / p) for p in (1.0, 1.1, 1.2)])
    slower_host = _rows([(p, 80 / p) for p in (2.0, 2.2, 2.4)])
    found = host_matched_ratio(reference, slower_host)
    assert found["ratio"] == pytest.approx(0.8)  # the medians' ratio: (80 / 2.2) / (100 / 1.1) = 0.4
    assert found["slope"] == pytest.approx(-1.0)
    assert found["generations"] == (3, 3)
    assert found["interval"] == pytest.approx((0.8, 0.8))  # exact points: every resample fits the same ratio


def test_host_matched_ratio_fits_one_slope_for_both_runs():
    # in logs: reference (x, y) = (0, 0), (1, -1); rows (0, 1), (1, -1). Within-run sums: Sxy -0.5 and -1, Sxx 0.5
    # and 0.5 -> slope -1.5; intercepts ybar - slope xbar: -0.5 + 0.75 = 0.25 and 0 + 0.75 = 0.75 -> ratio e^0.5
    reference = _rows([(1.0, 1.0), (math.e, math.exp(-1))])
    rows = _rows([(1.0, math.e), (math.e, math.exp(-1))])
    found = host_matched_ratio(reference, rows)
    assert found["slope"] == pytest.approx(-1.5)
    assert found["ratio"] == pytest.approx(math.exp(0.5))


def test_host_matched_ratios_interval_covers_the_ratio_and_narrows_with_less_noise():
    noise = (0.9, 1.1, 1.05, 0.95, 1.0, 0.92, 1.08, 1.02)  # multiplies each rate: the same pattern in both runs
    probes = (1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 1.3, 1.7)

    def runs(spread: float):
        reference = _rows([(p, 100 / p * (1 + spread * (n - 1))) for p, n in zip(probes, noise)])
        rows = _rows([(p, 80 / p * (1 + spread * (n - 1))) for p, n in zip(probes, reversed(noise))])
        return host_matched_ratio(reference, rows)

    noisy, quiet = runs(1.0), runs(0.1)
    assert noisy["interval"][0] < noisy["ratio"] < noisy["interval"][1]
    assert quiet["interval"][0] <= quiet["ratio"] <= quiet["interval"][1]
    assert quiet["interval"][1] - quiet["interval"][0] < (noisy["interval"][1] - noisy["interval"][0]) / 5
    assert runs(1.0) == noisy  # seeded


def test_host_matched_ratio_needs_probe_times_that_vary():
    reference = _rows([(1.0, 100.0), (1.2, 90.0)])
    assert host_matched_ratio(reference, _rows([(1.5, 50.0)]) + [{"tokens_per_s": 70.0}]) is None  # one with a probe
    assert host_matched_ratio(_rows([(1.0, 100.0), (1.0, 90.0)]), _rows([(2.0, 50.0), (2.0, 40.0)])) is None
