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


def test_every_listed_variant_parses():
    for variant in VARIANTS:
        if variant != "bare":
            rollout_options(variant, ARGS)
