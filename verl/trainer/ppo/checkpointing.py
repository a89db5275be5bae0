"""Where checkpoints live, which one to resume, and the trainer's own state (``data.pt``).

Layout under ``trainer.default_local_dir``::

    global_step_{N}/actor/       written by the actor worker group
    global_step_{N}/critic/      written by the critic worker group (when there is a critic)
    global_step_{N}/data.pt      dataloader position, KL coefficient, RNG states, reward history
    latest_checkpointed_iteration.txt   N, replaced atomically after everything above is on disk

Because the tracker file is written last, a run killed while saving resumes from the previous complete
checkpoint.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import tempfile
from typing import Any

import numpy as np
import torch

__all__ = [
    "CHECKPOINT_TRACKER",
    "find_latest_ckpt_path",
    "global_step_dir",
    "load_trainer_state",
    "prune_old_checkpoints",
    "resolve_resume_path",
    "rng_state",
    "save_trainer_state",
    "set_rng_state",
    "step_of",
    "write_tracker",
]

CHECKPOINT_TRACKER = "latest_checkpointed_iteration.txt"
TRAINER_STATE_FILE = "data.pt"
_STEP_DIR = re.compile(r"global_step_(\d+)$")


def global_step_dir(root: str, global_step: int) -> str:
    return os.path.join(root, f"global_step_{global_step}")


def step_of(path: str) -> int:
    """The N of a ``.../global_step_N`` folder; fails naming the path otherwise."""
    match = _STEP_DIR.search(os.path.normpath(path))
    if match is None:
        raise ValueError(f"trainer.resume_from_path={path!r} must point at a 'global_step_<N>' checkpoint folder")
    return int(match.group(1))


def write_tracker(root: str, global_step: int) -> None:
    """Atomically replace ``latest_checkpointed_iteration.txt`` with ``global_step`` (write temp, fsync, rename)."""
    os.makedirs(root, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tracker-", dir=root)
    with os.fdopen(fd, "w") as handle:
        handle.write(str(global_step))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, os.path.join(root, CHECKPOINT_TRACKER))


def find_latest_ckpt_path(root: str) -> str | None:
    """The checkpoint folder named by the tracker file under ``root``, or None if there is none yet."""
    tracker = os.path.join(root, CHECKPOINT_TRACKER)
    if not os.path.exists(tracker):
        return None
    with open(tracker) as handle:
        global_step = int(handle.read().strip())
    path = global_step_dir(root, global_step)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{tracker} names step {global_step} but {path} does not exist")
    return path


def resolve_resume_path(trainer_config) -> str | None:
    """The checkpoint to resume from according to ``trainer.resume_mode``.

    ``disable``: none. ``auto``: the latest under ``trainer.default_local_dir`` (none on a fresh start).
    ``resume_path``: ``trainer.resume_from_path``, which must be a ``global_step_<N>`` folder.
    """
    mode = trainer_config.resume_mode
    if mode == "disable":
        return None
    if mode == "auto":
        return find_latest_ckpt_path(trainer_config.default_local_dir)
    if mode == "resume_path":
        path = trainer_config.resume_from_path
        if not path:
            raise ValueError("trainer.resume_mode=resume_path needs trainer.resume_from_path=<.../global_step_N>")
        step_of(path)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"trainer.resume_from_path={path!r} does not exist")
        return path
    raise ValueError(f"trainer.resume_mode={mode!r}; choose one of ['auto', 'disable', 'resume_path']")


def rng_state() -> dict[str, Any]:
    """Python, numpy and torch (CPU and CUDA) generator states of this process."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_trainer_state(checkpoint_dir: str, state: dict[str, Any]) -> None:
    """Write ``state`` (plus this process's RNG states) to ``{checkpoint_dir}/data.pt`` via a temp file."""
    os.makedirs(checkpoint_dir, exist_ok=True)
    target = os.path.join(checkpoint_dir, TRAINER_STATE_FILE)
    tmp = target + ".tmp"
    torch.save({**state, "rng": rng_state()}, tmp)
    os.replace(tmp, target)


def load_trainer_state(checkpoint_dir: str) -> dict[str, Any]:
    """Read ``data.pt`` and restore this process's RNG states from it."""
    path = os.path.join(checkpoint_dir, TRAINER_STATE_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing: the checkpoint in {checkpoint_dir} is incomplete")
    state = torch.load(path, weights_only=False)
    set_rng_state(state["rng"])
    return state


def prune_old_checkpoints(root: str, keep: int | None) -> None:
    """Remove all but the newest ``keep`` ``global_step_*`` folders (keep None or <= 0: keep all)."""
    if not keep or keep <= 0 or not os.path.isdir(root):
        return
    steps = sorted(int(m.group(1)) for name in os.listdir(root) if (m := _STEP_DIR.match(name)))
    for step in steps[:-keep]:
        shutil.rmtree(global_step_dir(root, step), ignore_errors=True)
