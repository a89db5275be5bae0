"""Write a checkpoint folder atomically across ranks: everything goes to ``<path>.partial`` and rank 0 renames it
to ``<path>`` after all ranks finished writing. A crash mid-save leaves only the ``.partial`` folder, which
loading never reads; an older complete checkpoint at ``<path>`` is replaced only at the final rename."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager

import torch.distributed as dist

PARTIAL_SUFFIX = ".partial"


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


@contextmanager
def atomic_checkpoint_dir(path: str):
    """Yield the temporary folder to write into; on clean exit it becomes ``path`` (collective: all ranks)."""
    path = os.path.abspath(path)
    partial = path + PARTIAL_SUFFIX
    if _rank() == 0:
        shutil.rmtree(partial, ignore_errors=True)
        os.makedirs(partial)
    _barrier()
    yield partial
    _barrier()
    if _rank() == 0:
        if os.path.isdir(path):
            old = path + ".old"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(partial, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(partial, path)
    _barrier()
