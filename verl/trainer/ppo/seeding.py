"""Seeding every process of a run from ``trainer.seed``, so two runs with the same seed draw the same numbers.

Ray starts its worker processes with a random torch seed. ``main_ppo`` passes ``trainer.seed`` to every process
of the job in ``$VERL_SEED``; Ray's ``worker_process_setup_hook``
(:func:`verl.trainer.ppo.worker_setup.setup_worker_process`) calls :func:`seed_worker_process`, which seeds Python,
numpy and torch before any model is built (a critic's fresh value head, sampling in the HF rollout). Rank ``r`` of a
worker group uses ``seed + r`` so data-parallel ranks do not sample identically.
"""

from __future__ import annotations

import os
import random

SEED_ENV = "VERL_SEED"


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, numpy's global generator and torch (CPU and every CUDA device)."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def seed_worker_process() -> None:
    """Ray ``worker_process_setup_hook``: seed this process from ``$VERL_SEED`` (+ ``$RANK`` when set)."""
    if SEED_ENV in os.environ:
        seed_everything(int(os.environ[SEED_ENV]) + int(os.environ.get("RANK", "0") or 0))
