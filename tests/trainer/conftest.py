"""Fixtures shared by the end-to-end trainer tests."""

from __future__ import annotations

import pytest

from tests.trainer.main_ppo_runner import describe, resume_overrides, run_main_ppo


@pytest.fixture(scope="session")
def resume_reference(tmp_path_factory, shared_ray) -> list[dict]:
    """The file logger's records of an uninterrupted 3-step run of :func:`resume_overrides` (no checkpoints): the
    reference that the killed or interrupted and resumed runs (``test_main_ppo_interrupt.py``) must match step for
    step."""
    workdir = tmp_path_factory.mktemp("resume_reference")
    proc, records = run_main_ppo(
        resume_overrides(workdir, workdir / "unused", -1, "disable"), workdir, extra_env=shared_ray.env()
    )
    assert proc.returncode == 0, describe(proc)
    assert [r["step"] for r in records] == [1, 2, 3]
    return records
