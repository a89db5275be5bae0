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


def test_gsm8k_multiturn_w_tool_rows_feed_the_tool_agent(tmp_path):
    """verl's gsm8k_multiturn_w_tool schema, and what RLHFDataset hands the agent loop from it."""
    import subprocess
    import sys

    from transformers import AutoTokenizer

    from tests.support.models import smollm2_path
    from verl.utils.dataset.rl_dataset import RLHFDataset

    example = {"question": "Two apples and three more?", "answer": "2 + 3 = <<2+3=5>>5\n#### 5"}
    write_split(tmp_path / "src", "train", [example])
    write_split(tmp_path / "src", "test", [example])
    script = REPO_ROOT / "examples" / "data_preprocess" / "gsm8k_multiturn_w_tool.py"
    command = [sys.executable, str(script), "--local_dataset_path", str(tmp_path / "src")]
    subprocess.run([*command, "--local_save_dir", str(tmp_path / "out")], check=True, capture_output=True)
    (row,) = pq.read_table(tmp_path / "out" / "train.parquet").to_pylist()
    assert row["agent_name"] == "tool_agent" and row["data_source"] == "openai/gsm8k"
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert "calc_gsm8k_reward" in row["prompt"][0]["content"]
    assert row["extra_info"]["tools_kwargs"] == {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": "5"}}}
    assert row["extra_info"]["interaction_kwargs"]["name"] == "gsm8k"
    dataset = RLHFDataset(
        str(tmp_path / "out" / "train.parquet"),
        AutoTokenizer.from_pretrained(smollm2_path()),
        {"max_prompt_length": 256, "return_raw_chat": True},
    )
    item = dataset[0]
    assert item["agent_name"] == "tool_agent" and item["raw_prompt"] == row["prompt"]
    assert item["tools_kwargs"]["calc_gsm8k_reward"]["create_kwargs"]["ground_truth"] == "5"
    assert item["interaction_kwargs"]["ground_truth"] == "5"
