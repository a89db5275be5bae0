"""A checkpoint's manifest: every file of a ``global_step_N`` folder with its size and sha256, written last.

The trainer writes ``checkpoint_manifest.json`` after the actor, critic and trainer state are on disk, and before
the tracker file names the step. On resume :func:`verify_manifest` compares the folder with it, so a file truncated
or removed after the save (a full disk, a partial copy, a cleanup script) is found before any model loads it, by
name. A folder without a manifest was written by an older version and cannot be verified.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field

MANIFEST_FILE = "checkpoint_manifest.json"
"""Name of the manifest inside a ``global_step_N`` folder."""

FORMAT_VERSION = 1
_CHUNK = 16 << 20


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _files(folder: str) -> list[str]:
    """Relative paths of the regular files under ``folder`` (the manifest and temporary files excluded)."""
    found = []
    for root, _, names in os.walk(folder):
        for name in names:
            relative = os.path.relpath(os.path.join(root, name), folder)
            if relative != MANIFEST_FILE and not name.startswith(".") and not name.endswith(".tmp"):
                found.append(relative)
    return sorted(found)


def write_manifest(folder: str, checksums: bool = True) -> dict:
    """Record every file of ``folder`` (size, and sha256 when ``checksums``) in its manifest, atomically."""
    files = {}
    for relative in _files(folder):
        path = os.path.join(folder, relative)
        entry: dict = {"size": os.path.getsize(path)}
        if checksums:
            entry["sha256"] = _sha256(path)
        files[relative] = entry
    manifest = {"version": FORMAT_VERSION, "files": files}
    handle, tmp = tempfile.mkstemp(prefix=".manifest-", dir=folder)
    with os.fdopen(handle, "w") as out:
        json.dump(manifest, out, indent=1, sort_keys=True)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, os.path.join(folder, MANIFEST_FILE))
    return manifest


@dataclass
class Verification:
    """Result of :func:`verify_manifest`: ``problems`` (one line per bad file; empty when intact) and whether the
    folder had a manifest at all."""

    folder: str
    has_manifest: bool
    problems: list[str] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return self.has_manifest and not self.problems


def verify_manifest(folder: str, checksums: bool = True) -> Verification:
    """Compare ``folder`` with its manifest: each listed file must exist with its size (and sha256 when
    ``checksums`` and recorded). Files not listed are ignored."""
    path = os.path.join(folder, MANIFEST_FILE)
    if not os.path.isdir(folder):
        return Verification(folder, False, [f"{folder} does not exist"])
    if not os.path.exists(path):
        return Verification(folder, False)
    try:
        with open(path) as handle:
            files = json.load(handle)["files"]
    except (OSError, ValueError, KeyError) as exc:
        return Verification(folder, True, [f"{path} cannot be read ({type(exc).__name__}: {exc})"])
    problems = []
    for relative, entry in sorted(files.items()):
        file_path = os.path.join(folder, relative)
        if not os.path.isfile(file_path):
            problems.append(f"{file_path} is missing")
            continue
        size = os.path.getsize(file_path)
        if size != entry["size"]:
            problems.append(f"{file_path} has {size} bytes, {entry['size']} were saved (truncated or overwritten)")
        elif checksums and "sha256" in entry and _sha256(file_path) != entry["sha256"]:
            problems.append(f"{file_path} has the saved size but not the saved sha256 (its bytes changed)")
    return Verification(folder, True, problems)
