"""The built-in arithmetic task: deterministic rows, correct answers, atomic one-time materialisation."""

import importlib.util
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from verl.utils.dataset import resolve_data_files
from verl.utils.dataset.arithmetic import ArithmeticSpec, make_split
from verl.utils.reward_score import default_compute_score

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_rows_are_deterministic_correct_and_disjoint():
    spec = ArithmeticSpec(train_size=300, test_size=50)
    train, test = make_split("train", spec), make_split("test", spec)
    assert train == make_split("train", spec) and len(train) == 300 and len(test) == 50
    for row in train + test:
        expression = row["extra_info"]["expression"]
        assert int(row["reward_model"]["ground_truth"]) == eval(expression)  # noqa: S307 - digits, + and - only
        assert expression in row["prompt"][0]["content"] and row["data_source"] == "arithmetic"
        assert len(expression.split()) == 2 * spec.num_operands - 1
    assert not {r["extra_info"]["expression"] for r in train} & {r["extra_info"]["expression"] for r in test}
    answer = test[0]["reward_model"]["ground_truth"]
    assert default_compute_score("arithmetic", f"#### {answer}", answer)["score"] == 1.0


def test_sentinels_resolve_once_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_CACHE_DIR", str(tmp_path))
    (test_path,) = resolve_data_files("builtin://arithmetic/test")
    assert Path(test_path).parent == tmp_path / "data" / "arithmetic"
    mtime = Path(test_path).stat().st_mtime_ns
    assert resolve_data_files(["builtin://arithmetic/test", "~/x.parquet"]) == [
        test_path,
        str(Path.home() / "x.parquet"),
    ]
    assert Path(test_path).stat().st_mtime_ns == mtime  # not rewritten
    assert pq.read_table(test_path).to_pylist() == make_split("test")
    assert [p.name for p in (tmp_path / "data" / "arithmetic").iterdir()] == [Path(test_path).name]  # no temp files


def test_unknown_sentinel_lists_the_known_ones():
    with pytest.raises(ValueError, match="builtin://arithmetic/train"):
        resolve_data_files(["builtin://nope/train"])


def test_preprocess_script_writes_the_builtin_rows(tmp_path):
    spec = importlib.util.spec_from_file_location("arith", REPO_ROOT / "examples" / "data_preprocess" / "arithmetic.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--local_save_dir", str(tmp_path), "--train_size", "64", "--test_size", "16"])
    assert pq.read_table(tmp_path / "test.parquet").to_pylist() == make_split(
        "test", ArithmeticSpec(train_size=64, test_size=16)
    )
    assert pq.read_table(tmp_path / "train.parquet").num_rows == 64
