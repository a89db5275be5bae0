"""sglang_gap's variant names: each suffix turns on exactly one difference from the plain isolated rollout."""

import argparse

import pytest

from benchmarks.gpu.sglang_gap import VARIANTS, rollout_options

ARGS = argparse.Namespace(churn_gib=30.0, idle_s=2.0)
PLAIN = {"free_cache_engine": True, "churn_gib": 0.0, "idle_s": 0.0, "sleep_on_idle": True}


@pytest.mark.parametrize(
    "variant, changed",
    [
        ("rollout", {}),
        ("rollout-keep", {"free_cache_engine": False}),
        ("rollout-churn", {"churn_gib": 30.0}),
        ("rollout-idle", {"idle_s": 2.0}),
        ("rollout-idle-spin", {"idle_s": 2.0, "sleep_on_idle": False}),
        ("rollout-keep-churn-idle", {"free_cache_engine": False, "churn_gib": 30.0, "idle_s": 2.0}),
    ],
)
def test_suffixes_change_only_their_option(variant, changed):
    assert rollout_options(variant, ARGS) == {**PLAIN, **changed}


@pytest.mark.parametrize("variant", ["rollout-idel", "rolout", "rollout-ray-idle", "bare-idle"])
def test_unknown_names_are_refused(variant):
    with pytest.raises(ValueError, match=variant):
        rollout_options(variant, ARGS)


def test_listed_variants_are_distinct_setups():
    """Every rollout variant the benchmark runs by default is its own setup (``rollout-ray`` is ``rollout`` moved
    into a Ray actor, so it shares ``rollout``'s options)."""
    listed = [v for v in VARIANTS if v not in ("bare", "rollout-ray")]
    setups = {tuple(sorted(rollout_options(v, ARGS).items())) for v in listed}
    assert len(setups) == len(listed)
    assert rollout_options("rollout-ray", ARGS) == PLAIN
