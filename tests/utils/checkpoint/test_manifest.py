"""The manifest lists what a checkpoint folder held when it was saved; verification names what changed since."""

import hashlib
import json

from verl.utils.checkpoint.manifest import MANIFEST_FILE, verify_manifest, write_manifest


def test_manifest_records_sizes_and_sha256_of_every_file(tmp_path):
    (tmp_path / "actor").mkdir()
    (tmp_path / "actor" / "shard.distcp").write_bytes(b"abc")
    (tmp_path / "data.pt").write_bytes(b"")
    (tmp_path / "data.pt.tmp").write_bytes(b"left over from an interrupted write")
    write_manifest(str(tmp_path))
    recorded = json.loads((tmp_path / MANIFEST_FILE).read_text())["files"]
    assert recorded == {
        "actor/shard.distcp": {"size": 3, "sha256": hashlib.sha256(b"abc").hexdigest()},
        "data.pt": {"size": 0, "sha256": hashlib.sha256(b"").hexdigest()},
    }
    assert verify_manifest(str(tmp_path)).intact
    (tmp_path / "notes.txt").write_text("added later")  # files not in the manifest are not its business
    assert verify_manifest(str(tmp_path)).intact


def test_verification_names_each_damaged_file(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / name).write_bytes(b"0123")
    write_manifest(str(tmp_path))
    (tmp_path / "a").write_bytes(b"01")
    (tmp_path / "b").unlink()
    (tmp_path / "c").write_bytes(b"9999")
    result = verify_manifest(str(tmp_path))
    assert result.problems == [
        f"{tmp_path / 'a'} has 2 bytes, 4 were saved (truncated or overwritten)",
        f"{tmp_path / 'b'} is missing",
        f"{tmp_path / 'c'} has the saved size but not the saved sha256 (its bytes changed)",
    ]
    assert verify_manifest(str(tmp_path), checksums=False).problems == result.problems[:2]


def test_missing_or_unreadable_manifest(tmp_path):
    result = verify_manifest(str(tmp_path))
    assert not result.has_manifest and not result.problems and not result.intact
    (tmp_path / MANIFEST_FILE).write_text("{not json")
    result = verify_manifest(str(tmp_path))
    assert result.has_manifest and "cannot be read" in result.problems[0]
    assert verify_manifest(str(tmp_path / "gone")).problems == [f"{tmp_path / 'gone'} does not exist"]
