"""examples/data_preprocess/math_dataset.py and gsm8k.py on hand-made local jsonl."""

import importlib.util
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "examples" / "data_preprocess" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_split(folder: Path, split: str, rows: list[dict]) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_math_dataset_ground_truth_is_the_last_box(tmp_path):
    source = tmp_path / "src"
    problems = [
        {"problem": "Half of one?", "solution": "It is $\\boxed{\\frac{1}{2}}$."},
        {"problem": "Two boxes?", "solution": "Not \\boxed{1} but $\\boxed{\\sqrt{2}}$"},
    ]
    write_split(source, "train", problems)
    write_split(source, "test", problems[:1])
    load_script("math_dataset").main(["--local_dataset_path", str(source), "--local_save_dir", str(tmp_path / "out")])
    rows = pq.read_table(tmp_path / "out" / "train.parquet").to_pylist()
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["\\frac{1}{2}", "\\sqrt{2}"]
    assert rows[0]["data_source"] == "DigitalLearningGmbH/MATH-lighteval"
    assert rows[0]["prompt"] == [
        {
            "role": "user",
            "content": "Half of one? Let's think step by step and output the final answer within \\boxed{}.",
        }
    ]
    assert pq.read_table(tmp_path / "out" / "test.parquet").num_rows == 1


def test_math_dataset_refuses_a_solution_without_box(tmp_path):
    write_split(tmp_path / "src", "train", [{"problem": "p", "solution": "no box"}])
    write_split(tmp_path / "src", "test", [])
    with pytest.raises(ValueError, match="no \\\\boxed"):
        load_script("math_dataset").main(
            ["--local_dataset_path", str(tmp_path / "src"), "--local_save_dir", str(tmp_path)]
        )


def test_gsm8k_ground_truth_drops_commas(tmp_path):
    source = tmp_path / "src"
    write_split(source, "train", [{"question": "Big?", "answer": "1000 + 234 = <<1000+234=1234>>1234\n#### 1,234"}])
    write_split(source, "test", [{"question": "Neg?", "answer": "#### -5"}])
    load_script("gsm8k").main(["--local_dataset_path", str(source), "--local_save_dir", str(tmp_path / "out")])
    train = pq.read_table(tmp_path / "out" / "train.parquet").to_pylist()
    test = pq.read_table(tmp_path / "out" / "test.parquet").to_pylist()
    assert train[0]["reward_model"]["ground_truth"] == "1234" and test[0]["reward_model"]["ground_truth"] == "-5"
    assert train[0]["extra_info"]["question"] == "Big?" and train[0]["data_source"] == "openai/gsm8k"
