"""The loop profiler's wrappers (benchmarks.gpu.loop_profile): each call's wall time is recorded and the method's
result and exceptions pass through unchanged; without its directory variable nothing is wrapped."""

import json
import os

import pytest

from benchmarks.gpu import loop_profile


class Role:
    def update(self, value):
        if value is None:
            raise KeyError("no value")
        return value * 2


def test_wrapped_methods_record_every_call_and_pass_results_through(tmp_path, monkeypatch):
    monkeypatch.setenv(loop_profile.DIR_ENV, str(tmp_path))
    monkeypatch.setattr(loop_profile, "TARGETS", {f"{__name__}.Role": ("update",)})
    original = Role.update
    try:
        loop_profile.install()
        assert Role.update is not original
        assert Role().update(21) == 42
        with pytest.raises(KeyError, match="no value"):
            Role().update(None)
    finally:
        Role.update = original
    calls = [json.loads(line) for line in (tmp_path / f"calls.{os.getpid()}.jsonl").read_text().splitlines()]
    assert [(c["method"], c["call"]) for c in calls] == [("Role.update", 1), ("Role.update", 2)]
    assert all(c["wall_s"] >= 0 for c in calls)


def test_nothing_is_wrapped_without_the_directory(monkeypatch):
    monkeypatch.delenv(loop_profile.DIR_ENV, raising=False)
    monkeypatch.setattr(loop_profile, "TARGETS", {f"{__name__}.Role": ("update",)})
    original = Role.update
    loop_profile.install()
    assert Role.update is original
