"""End to end, a user's faults end in a message, never a hang or NaN training, and nothing saved is lost:

- a reward function returning NaN stops the run before the update, naming the function, data source and value;
- a checkpoint with a truncated file is named and skipped for the newest intact one (the default fallback), and a
  reward function that hangs on every sample is cut at ``reward_model.scoring.timeout``, scored with the fallback
  and counted in ``reward/timeouts`` with a warning;
- Ctrl-C while the reward function hangs stops the run within 10 s and ends the scoring processes.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.files import process_alive as _alive
from tests.support.files import snapshot as _snapshot
from tests.support.models import tiny_model_path
from tests.trainer.main_ppo_runner import LiveRun, describe, run_main_ppo, tiny_overrides

REWARD_FILE = """
import os, time

def compute_score(data_source, solution_str, ground_truth, extra_info=None, mode="ok", marker=None):
    if mode == "give_nan":  # not "nan": Hydra would read that override as a float
        return float("nan")
    if mode == "hang":
        if marker:
            with open(marker, "a") as handle:
                handle.write(f"{os.getpid()}\\n")
        time.sleep(100_000)
    return float(ground_truth in solution_str)
"""


def _overrides(workdir: Path, reward_file: Path, steps: int, mode: str, *extra: str) -> list[str]:
    overrides = [
        o
        for o in tiny_overrides(tiny_model_path("llama"), workdir, rollout="hf", steps=steps)
        if not o.startswith(("trainer.save_freq", "trainer.resume_mode", "trainer.default_local_dir"))
    ]
    return overrides + [
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        "trainer.save_freq=1",
        "trainer.resume_mode=auto",
        f"trainer.default_local_dir={workdir.parent / 'checkpoints'}",
        f"custom_reward_function.path={reward_file}",
        f"+custom_reward_function.reward_kwargs.mode={mode}",
        *extra,
    ]


@pytest.fixture
def reward_file(tmp_path) -> Path:
    path = tmp_path / "my_reward.py"
    path.write_text(REWARD_FILE)
    return path


@pytest.mark.slow
def test_nan_rewards_and_damaged_checkpoints_end_in_messages_and_keep_what_was_saved(tmp_path, reward_file, shared_ray):
    checkpoints = tmp_path / "checkpoints"
    runs = [tmp_path / name for name in ("train", "nan", "fallback")]
    for folder in runs:
        folder.mkdir()

    mirror = tmp_path / "mirror"  # verl's trainer.default_hdfs_dir, here a local folder
    proc, records = run_main_ppo(
        _overrides(runs[0], reward_file, 2, "ok", f"trainer.default_hdfs_dir={mirror}"),
        runs[0],
        extra_env=shared_ray.env(),
    )
    assert proc.returncode == 0, describe(proc)
    assert [r["step"] for r in records] == [1, 2]
    assert records[0]["data"]["reward/timeouts"] == 0.0 and records[0]["data"]["reward/errors"] == 0.0
    saved = _snapshot(checkpoints)
    assert _snapshot(mirror) == saved and "global_step_2/data.pt" in saved

    # NaN reward: stopped at step 3's scoring, before any update, naming function, data source and value
    proc, records = run_main_ppo(_overrides(runs[1], reward_file, 3, "give_nan"), runs[1], extra_env=shared_ray.env())
    assert proc.returncode != 0 and records == []
    output = proc.stdout + proc.stderr
    assert f"RewardFunctionError: the reward function compute_score ({reward_file}:4) failed on sample 0 of 8" in output
    assert "(data_source 'arithmetic'): it returned nan; a reward must be a finite number" in output
    assert _snapshot(checkpoints) == saved, "a failed run changed the saved checkpoints"

    # a truncated shard of step 2: resumed from step 1 with a loud warning; a hanging reward function falls back
    shards = sorted((checkpoints / "global_step_2" / "actor").rglob("*.distcp"))
    shards[0].write_bytes(b"")
    proc, records = run_main_ppo(
        _overrides(
            runs[2],
            reward_file,
            2,
            "hang",
            "reward_model.scoring.timeout=2",
            # one scoring process per sample: the 8 hanging calls are cut together after 2 s, not in rounds of
            # os.cpu_count() (queued samples and replaced processes: test_function_scorer.py)
            "reward_model.scoring.num_processes=8",
            "reward_model.scoring.on_error=fallback",
            "reward_model.scoring.fallback_score=0.25",
        ),
        runs[2],
        extra_env=shared_ray.env(),
    )
    assert proc.returncode == 0, describe(proc)
    assert "CHECKPOINT DAMAGED" in proc.stdout
    assert f"{shards[0]} has 0 bytes, {len(saved[str(shards[0].relative_to(checkpoints))])} were saved" in proc.stdout
    assert f"Resuming from the newest intact checkpoint instead: {checkpoints / 'global_step_1'}" in proc.stdout
    assert [r["step"] for r in records] == [2]
    assert records[0]["data"]["reward/timeouts"] == 8.0 and records[0]["data"]["reward/errors"] == 0.0
    assert records[0]["data"]["critic/score/mean"] == pytest.approx(0.25)
    assert "failed on 8 of 8 samples (timeouts 8, errors 0); they score reward_model.scoring.fallback_score=0.25" in (
        proc.stdout + proc.stderr
    )
    step_1 = {k: v for k, v in saved.items() if k.startswith("global_step_1/")}
    assert {k: v for k, v in _snapshot(checkpoints).items() if k.startswith("global_step_1/")} == step_1


@pytest.mark.slow
def test_ctrl_c_while_the_reward_function_hangs(tmp_path, reward_file):
    marker = tmp_path / "scorers.txt"
    workdir = tmp_path / "run"
    workdir.mkdir()
    run = LiveRun(
        _overrides(workdir, reward_file, 1, "hang", f"+custom_reward_function.reward_kwargs.marker={marker}"), workdir
    )
    try:
        deadline = time.monotonic() + 420
        while not (marker.exists() and marker.read_text().strip()):
            assert time.monotonic() < deadline and run.proc.poll() is None, run.output[-4000:]
            time.sleep(0.2)
        scorers = [int(pid) for pid in marker.read_text().split()]
        elapsed = run.interrupt()
    finally:
        run.kill()
    assert elapsed < 10, f"exit took {elapsed:.1f}s after SIGINT"
    assert run.proc.returncode == 130
    assert "Interrupted (Ctrl-C)" in run.output and "No checkpoint was saved yet" in run.output
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in scorers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in scorers), "a scoring process outlived the run"
