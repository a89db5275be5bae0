"""verl.utils.fs / hdfs_io: local paths pass through or copy, /dev/shm mirrors, hdfs:// names its requirement."""

import os
import shutil

import pytest

from verl.utils import fs, hdfs_io


def test_local_paths_and_copies(tmp_path):
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "sub" / "w.bin").write_bytes(b"12345")
    assert fs.copy_to_local(str(folder)) == str(folder)
    assert hdfs_io.exists(str(folder)) and not hdfs_io.exists(str(tmp_path / "nope"))
    hdfs_io.makedirs(str(tmp_path / "a" / "b"), exist_ok=True)
    assert (tmp_path / "a" / "b").is_dir()
    hdfs_io.copy(str(folder), str(tmp_path / "copy"))
    assert fs.verify_copy(str(folder), str(tmp_path / "copy"))
    (tmp_path / "copy" / "sub" / "w.bin").write_bytes(b"1")
    assert not fs.verify_copy(str(folder), str(tmp_path / "copy"))


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_use_shm_mirrors_into_shared_memory(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "w.bin").write_bytes(b"abc")
    shm = fs.copy_to_local(str(folder), use_shm=True)
    try:
        assert shm.startswith(fs.SHM_CACHE_ROOT) and open(os.path.join(shm, "w.bin"), "rb").read() == b"abc"
        assert fs.copy_to_local(str(folder), use_shm=True) == shm  # reused
    finally:
        shutil.rmtree(os.path.dirname(shm), ignore_errors=True)


def test_hdfs_without_client_names_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `hdfs` command
    with pytest.raises(RuntimeError, match="Hadoop client"):
        fs.copy_to_local("hdfs://cluster/data/train.parquet", cache_dir=str(tmp_path))
    with pytest.raises(RuntimeError, match="hdfs://cluster/x"):
        hdfs_io.makedirs("hdfs://cluster/x")
    assert fs.is_non_local("hdfs://x") and not fs.is_non_local("/x")
    with pytest.raises(ValueError, match="trailing"):
        fs.copy_to_local("hdfs://cluster/data/")


def test_write_folder_once_renames_a_complete_folder_into_place(tmp_path):
    target = tmp_path / "models" / "derived"
    assert fs.write_folder_once(target, lambda folder: (folder / "config.json").write_text("{}")) == str(target)
    assert (target / "config.json").read_text() == "{}"
    assert sorted(p.name for p in target.parent.iterdir()) == ["derived"]  # no temporary sibling left


def test_write_folder_once_leaves_nothing_when_the_write_fails(tmp_path):
    def half_then_fail(folder):
        (folder / "model.safetensors").write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fs.write_folder_once(tmp_path / "derived", half_then_fail)
    assert list(tmp_path.iterdir()) == []


def test_write_folder_once_keeps_the_copy_another_process_finished_first(tmp_path):
    target = tmp_path / "derived"

    def racing(folder):
        (folder / "config.json").write_text("mine")
        target.mkdir()  # the other process's rename lands while this one writes
        (target / "config.json").write_text("theirs")

    assert fs.write_folder_once(target, racing) == str(target)
    assert (target / "config.json").read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["derived"]
