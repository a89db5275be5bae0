"""verl's ``verl.utils.fs``: turn any model or data path into a local one.

``copy_to_local`` returns a local path unchanged and downloads an ``hdfs://`` path once into a cache folder
(``<cache_dir>/<md5(path)>/<basename>``, guarded by a file lock so that concurrent workers copy it once). With
``use_shm=True`` the local copy is mirrored into ``/dev/shm/verl-cache`` (RAM), so that several processes loading
the same model read it from memory.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from verl.utils.hdfs_io import copy, exists, makedirs

__all__ = [
    "copy",
    "copy_local_path_from_hdfs",
    "copy_to_local",
    "copy_to_shm",
    "exists",
    "get_local_temp_path",
    "is_non_local",
    "local_mkdir_safe",
    "makedirs",
    "md5_encode",
    "verify_copy",
    "write_folder_once",
]

_HDFS_PREFIX = "hdfs://"
SHM_CACHE_ROOT = "/dev/shm/verl-cache"
"""Where ``use_shm`` copies go."""


def is_non_local(path: str) -> bool:
    """True for an ``hdfs://`` URI."""
    return str(path).startswith(_HDFS_PREFIX)


def md5_encode(path: str) -> str:
    """Hex md5 of the path string (names cache folders and lock files)."""
    return hashlib.md5(path.encode()).hexdigest()


def get_local_temp_path(hdfs_path: str, cache_dir: str) -> str:
    """``<cache_dir>/<md5(hdfs_path)>/<basename(hdfs_path)>``, creating the md5 folder."""
    folder = os.path.join(cache_dir, md5_encode(hdfs_path))
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, os.path.basename(hdfs_path.rstrip("/")))


def _relative_sizes(root: str) -> dict[str, int | None]:
    """``{relative path: size (None for a folder)}`` of everything under ``root``."""
    entries: dict[str, int | None] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            entries[os.path.relpath(os.path.join(folder, name), root)] = None
        for name in files:
            path = os.path.join(folder, name)
            entries[os.path.relpath(path, root)] = os.path.getsize(path)
    return entries


def verify_copy(src: str, dest: str) -> bool:
    """Whether ``dest`` holds the same files and folders as ``src``, with the same sizes."""
    if not (os.path.exists(src) and os.path.exists(dest)) or os.path.isfile(src) != os.path.isfile(dest):
        return False
    if os.path.isfile(src):
        return os.path.getsize(src) == os.path.getsize(dest)
    return _relative_sizes(src) == _relative_sizes(dest)


def copy_to_shm(src: str) -> str:
    """Mirror the local file or folder ``src`` into ``/dev/shm/verl-cache/<md5(abs src)>/<basename>``; an existing
    complete copy is reused."""
    source = os.path.abspath(os.path.normpath(src))
    dest = os.path.join(SHM_CACHE_ROOT, md5_encode(source), os.path.basename(source))
    if not verify_copy(source, dest):
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if os.path.isdir(source):
            shutil.copytree(source, dest, dirs_exist_ok=True)
        else:
            shutil.copy2(source, dest)
    return dest


def copy_local_path_from_hdfs(
    src: str, cache_dir: str | None = None, filelock: str = ".file.lock", verbose: bool = False, always_recopy=False
) -> str:
    """``src`` itself when local; for ``hdfs://`` the path of its cached local copy (downloaded when missing,
    incomplete, or ``always_recopy``)."""
    if src.endswith("/"):
        raise ValueError(f"copy_to_local: drop the trailing '/' of {src!r}")
    if not is_non_local(src):
        return src
    from filelock import FileLock

    cache_dir = cache_dir or tempfile.gettempdir()
    os.makedirs(cache_dir, exist_ok=True)
    local_path = get_local_temp_path(src, cache_dir)
    with FileLock(os.path.join(cache_dir, md5_encode(src) + ".lock")):
        if always_recopy and os.path.exists(local_path):
            shutil.rmtree(local_path) if os.path.isdir(local_path) else os.remove(local_path)
        if not os.path.exists(local_path):
            if verbose:
                print(f"copying {src} to {local_path}")
            copy(src, local_path)
    return local_path


def copy_to_local(
    src: str,
    cache_dir: str | None = None,
    filelock: str = ".file.lock",
    verbose: bool = False,
    always_recopy: bool = False,
    use_shm: bool = False,
) -> str:
    """A local path for ``src`` (local path, or ``hdfs://`` URI copied into ``cache_dir``), mirrored into
    ``/dev/shm`` when ``use_shm``."""
    local_path = copy_local_path_from_hdfs(src, cache_dir, filelock, verbose, always_recopy)
    if use_shm:
        if not os.path.exists(local_path):
            raise FileNotFoundError(f"use_shm: {local_path!r} is not a local file or folder to copy into /dev/shm")
        return copy_to_shm(local_path)
    return local_path


def local_mkdir_safe(path: str) -> str:
    """Create ``path`` (relative paths are taken from the working folder) even when several processes race."""
    path = os.path.abspath(path)
    os.makedirs(path, exist_ok=True)
    return path


def write_folder_once(target: str | os.PathLike, write: Callable[[Path], object]) -> str:
    """``write(folder)`` into a temporary sibling of ``target``, then rename it to ``target``: an interrupted write
    leaves no half-written folder behind, and when another process renamed its own copy first, that one is kept
    (for folders that any process may build, such as derived or converted models). Returns ``target``."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        write(tmp)
        tmp.rename(target)
    except OSError:
        if not target.is_dir():  # not another process's copy in place: a real failure
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(target)
