"""Ports and the 1-rank torch.distributed world of a standalone process (a script, an entry point, a test)."""

from __future__ import annotations

import os
import socket

import torch.distributed as dist

_WORLD_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def free_port() -> int:
    """A TCP port that was free on this host a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def env_describes_multi_rank_world() -> bool:
    """True when torchrun (or a launcher like it) put this process in a world of more than one rank."""
    return "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1


def init_process_group(backend: str) -> None:
    """Join the world the environment describes, or create a 1-rank world on a fresh local port.

    A 1-rank world never reuses an inherited ``MASTER_PORT``: a parent process (a test runner, a driver that
    once ran a world of its own) may leave one in the environment that another process now listens on, and a
    1-rank world's rendezvous store is its own, so any free port serves.
    """
    if not env_describes_multi_rank_world():
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")
        os.environ["MASTER_PORT"] = str(free_port())
    dist.init_process_group(backend=backend)
