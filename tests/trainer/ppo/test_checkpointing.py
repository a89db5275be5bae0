"""Checkpoint bookkeeping: tracker file, resume modes, trainer state with RNG, pruning."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from verl.trainer.ppo import checkpointing


def _trainer_config(root, mode="auto", path=None):
    return SimpleNamespace(default_local_dir=str(root), resume_mode=mode, resume_from_path=path)


def test_auto_resume_follows_the_tracker(tmp_path):
    assert checkpointing.resolve_resume_path(_trainer_config(tmp_path)) is None
    for step in (2, 4):
        checkpointing.save_trainer_state(checkpointing.global_step_dir(str(tmp_path), step), {"global_step": step})
    # step 4's folder exists but the tracker still says 2: a crash before the tracker write resumes from 2
    checkpointing.write_tracker(str(tmp_path), 2)
    assert checkpointing.resolve_resume_path(_trainer_config(tmp_path)) == str(tmp_path / "global_step_2")
    checkpointing.write_tracker(str(tmp_path), 4)
    assert (tmp_path / "latest_checkpointed_iteration.txt").read_text() == "4"
    assert checkpointing.resolve_resume_path(_trainer_config(tmp_path)) == str(tmp_path / "global_step_4")
    assert checkpointing.resolve_resume_path(_trainer_config(tmp_path, mode="disable")) is None


def test_resume_path_mode_checks_the_folder(tmp_path):
    with pytest.raises(ValueError, match="resume_from_path"):
        checkpointing.resolve_resume_path(_trainer_config(tmp_path, "resume_path", None))
    with pytest.raises(ValueError, match="global_step_<N>"):
        checkpointing.resolve_resume_path(_trainer_config(tmp_path, "resume_path", str(tmp_path)))
    with pytest.raises(FileNotFoundError):
        checkpointing.resolve_resume_path(_trainer_config(tmp_path, "resume_path", str(tmp_path / "global_step_3")))
    (tmp_path / "global_step_3").mkdir()
    path = checkpointing.resolve_resume_path(_trainer_config(tmp_path, "resume_path", str(tmp_path / "global_step_3")))
    assert checkpointing.step_of(path) == 3


def test_trainer_state_restores_rng_streams(tmp_path):
    torch.manual_seed(0), np.random.seed(0), random.seed(0)
    checkpointing.save_trainer_state(str(tmp_path), {"global_step": 7, "dataloader": {"epoch": 1}})
    expected = (torch.rand(3), np.random.rand(3), random.random())
    torch.manual_seed(123), np.random.seed(123), random.seed(123)
    state = checkpointing.load_trainer_state(str(tmp_path))
    assert state["global_step"] == 7 and state["dataloader"] == {"epoch": 1}
    assert torch.equal(torch.rand(3), expected[0])
    assert np.array_equal(np.random.rand(3), expected[1])
    assert random.random() == expected[2]


def test_missing_state_file_is_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match="data.pt"):
        checkpointing.load_trainer_state(str(tmp_path))


def test_prune_keeps_the_newest(tmp_path):
    for step in (1, 2, 10, 3):
        (tmp_path / f"global_step_{step}").mkdir()
    checkpointing.prune_old_checkpoints(str(tmp_path), keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["global_step_10", "global_step_3"]
