"""verl's ``verl.utils.hdfs_io``: ``exists``, ``makedirs`` and ``copy`` for local paths and ``hdfs://`` URIs.

Local paths use the standard library. ``hdfs://`` paths go through the Hadoop client (``hdfs dfs ...``), which must
be on ``PATH``; without it they fail with a message that says so. A copy between a local path and HDFS uploads or
downloads (``-put`` / ``-get``).
"""

from __future__ import annotations

import os
import shutil
import subprocess

__all__ = ["copy", "exists", "makedirs"]

_HDFS_PREFIX = "hdfs://"


def _is_hdfs(path: str) -> bool:
    return str(path).startswith(_HDFS_PREFIX)


def _hdfs(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    client = shutil.which("hdfs")
    if client is None:
        raise RuntimeError(
            f"{' '.join(a for a in args if _is_hdfs(a))}: hdfs:// paths need the Hadoop client: install Hadoop and put "
            "its `hdfs` command on PATH (or copy the data to a local path first)"
        )
    return subprocess.run([client, "dfs", *args], check=check, capture_output=True, text=True)


def exists(path: str, **kwargs) -> bool:
    """Whether ``path`` (a local path or an ``hdfs://`` URI) exists."""
    if _is_hdfs(path):
        return _hdfs("-test", "-e", path, check=False).returncode == 0
    return os.path.exists(path)


def makedirs(name: str, mode: int = 0o777, exist_ok: bool = False, **kwargs) -> None:
    """Create the folder ``name`` and its parents, as ``os.makedirs`` (``-mkdir -p`` on HDFS)."""
    if _is_hdfs(name):
        if not exist_ok and exists(name):
            raise FileExistsError(f"{name} already exists")
        _hdfs("-mkdir", "-p", name)
        return
    os.makedirs(name, mode=mode, exist_ok=exist_ok)


def copy(src: str, dst: str, **kwargs) -> bool:
    """Copy a file or a folder (recursively) from ``src`` to ``dst``; either side may be on HDFS. Returns True."""
    if _is_hdfs(src) or _is_hdfs(dst):
        if _is_hdfs(src) and _is_hdfs(dst):
            _hdfs("-cp", "-f", src, dst)
        elif _is_hdfs(src):
            _hdfs("-get", src, dst)
        else:
            _hdfs("-put", "-f", src, dst)
        return True
    if os.path.isdir(src):
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        parent = os.path.dirname(os.path.abspath(dst))
        os.makedirs(parent, exist_ok=True)
        shutil.copy2(src, dst)
    return True
