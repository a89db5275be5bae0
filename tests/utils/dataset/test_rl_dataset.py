"""RLHFDataset on the GSM8K sample (through the preprocess script) and on hand-made rows."""

import importlib.util
import logging
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from tests.utils.dataset.rows import make_row, write_jsonl, write_parquet
from verl.utils.dataset import RLHFDataset, collate_fn

REPO_ROOT = Path(__file__).resolve().parents[3]
GSM8K_DIR = REPO_ROOT / ".." / "shared" / "data" / "gsm8k"
GSM8K_INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'


def data_config(**overrides):
    base = {"prompt_key": "prompt", "max_prompt_length": 64, "truncation": "error", "filter_overlong_prompts": False}
    return OmegaConf.create({**base, **overrides})


def reference_ids(tokenizer, content: str) -> list[int]:
    """The chat-templated prompt tokenized plainly: what the dataset must produce before padding."""
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )
    return tokenizer.encode(text, add_special_tokens=False)


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "examples" / "data_preprocess" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not GSM8K_DIR.is_dir(), reason="the GSM8K sample lives in ../shared/data/gsm8k")
def test_gsm8k_sample_through_preprocess_and_dataset(tokenizer, tmp_path):
    load_script("gsm8k").main(
        ["--local_dataset_path", str(GSM8K_DIR), "--local_save_dir", str(tmp_path), "--max_samples", "300"]
    )
    lines = (GSM8K_DIR / "test.jsonl").read_text().splitlines()[:300]
    import json

    examples = [json.loads(line) for line in lines]
    config = data_config(max_prompt_length=160, filter_overlong_prompts=True, return_raw_chat=True)
    dataset = RLHFDataset(str(tmp_path / "test.parquet"), tokenizer, config)

    lengths = [len(reference_ids(tokenizer, f"{e['question']} {GSM8K_INSTRUCTION}")) for e in examples]
    kept = [e for e, n in zip(examples, lengths) if n <= 160]
    assert len(dataset) == len(kept) and dataset.num_filtered == len(examples) - len(kept)
    for position in (0, len(dataset) - 1):
        item, example = dataset[position], kept[position]
        content = f"{example['question']} {GSM8K_INSTRUCTION}"
        assert item["raw_prompt"] == [{"role": "user", "content": content}]
        expected = reference_ids(tokenizer, content)
        valid = item["attention_mask"].bool()
        assert item["input_ids"][valid].tolist() == expected == item["raw_prompt_ids"]
        truth = example["answer"].split("####")[-1].strip().replace(",", "")
        assert item["reward_model"] == {"style": "rule", "ground_truth": truth}
        assert item["data_source"] == "openai/gsm8k"
    assert dataset[0]["reward_model"]["ground_truth"] == "18"  # the first test question (Janet's ducks)
    train = RLHFDataset(str(tmp_path / "train.parquet"), tokenizer, data_config(max_prompt_length=512))
    assert len(train) == 300 and train[0]["reward_model"]["ground_truth"] == "72"


def test_left_padding_positions_and_item_fields(tokenizer, tmp_path):
    rows = [make_row("What is 2 + 3?", "5", index=7), make_row("Hi", "0", index=8)]
    dataset = RLHFDataset(write_jsonl(rows, tmp_path / "rows.jsonl"), tokenizer, data_config(return_raw_chat=True))
    item = dataset[0]
    expected = reference_ids(tokenizer, "What is 2 + 3?")
    n, pad = len(expected), 64 - len(expected)
    assert item["input_ids"].shape == item["attention_mask"].shape == item["position_ids"].shape == (64,)
    assert item["input_ids"].tolist() == [tokenizer.pad_token_id] * pad + expected
    assert item["attention_mask"].tolist() == [0] * pad + [1] * n
    assert item["position_ids"].tolist() == [0] * pad + list(range(n))
    assert item["raw_prompt_ids"] == expected
    assert item["index"] == 7 and item["tools_kwargs"] == {}
    assert item["extra_info"] == {"split": "train", "index": 7}

    batch = collate_fn([dataset[0], dataset[1]])
    assert batch["input_ids"].shape == (2, 64) and batch["input_ids"].dtype == torch.long
    assert batch["data_source"].dtype == object and batch["data_source"].shape == (2,)
    assert batch["raw_prompt"].shape == (2,) and batch["raw_prompt"][1] == [{"role": "user", "content": "Hi"}]
    assert list(batch["reward_model"]) == [
        {"style": "rule", "ground_truth": "5"},
        {"style": "rule", "ground_truth": "0"},
    ]


@pytest.mark.parametrize("truncation", ["left", "right", "middle", "error"])
def test_truncation_modes(tokenizer, tmp_path, truncation):
    content = " ".join(f"word{i}" for i in range(40))
    expected = reference_ids(tokenizer, content)
    assert len(expected) > 20
    path = write_jsonl([make_row(content)], tmp_path / "long.jsonl")
    dataset = RLHFDataset(path, tokenizer, data_config(max_prompt_length=20, truncation=truncation))
    if truncation == "error":
        with pytest.raises(ValueError, match="max_prompt_length=20"):
            dataset[0]
        return
    reference = {"left": expected[-20:], "right": expected[:20], "middle": expected[:10] + expected[-10:]}
    item = dataset[0]
    assert item["input_ids"].tolist() == reference[truncation]
    assert item["attention_mask"].tolist() == [1] * 20
    assert item["position_ids"].tolist() == list(range(20))


def test_filtering_overlong_prompts_counts_and_logs(tokenizer, tmp_path, caplog):
    contents = ["short", "a bit longer prompt here", " ".join(["many words"] * 30), "x " * 5, "y " * 200]
    lengths = [len(reference_ids(tokenizer, c)) for c in contents]
    limit = sorted(lengths)[2]  # keeps exactly the three shortest
    rows = [make_row(c, index=i) for i, c in enumerate(contents)]
    with caplog.at_level(logging.WARNING, logger="verl.utils.dataset.rl_dataset"):
        dataset = RLHFDataset(
            write_parquet(rows, tmp_path / "rows.parquet"),
            tokenizer,
            data_config(max_prompt_length=limit, filter_overlong_prompts=True),
        )
    kept = [i for i, n in enumerate(lengths) if n <= limit]
    assert [dataset[j]["index"] for j in range(len(dataset))] == kept
    assert dataset.num_filtered == 2
    assert "filtered 2 of 5 prompts" in caplog.text


def test_filter_workers_and_shared_memory_copies_keep_the_same_rows(tokenizer, tmp_path):
    """data.filter_overlong_prompts_workers=2 measures in two processes, data.use_shm reads a /dev/shm copy: the
    kept rows are the ones a single in-process pass over the original file keeps (the reference lengths)."""
    import shutil

    contents = ["short", " ".join(["many words"] * 30), "x " * 5, "y " * 200, "medium prompt text"]
    lengths = [len(reference_ids(tokenizer, c)) for c in contents]
    limit = sorted(lengths)[2]
    path = write_parquet([make_row(c, index=i) for i, c in enumerate(contents)], tmp_path / "rows.parquet")
    config = data_config(max_prompt_length=limit, filter_overlong_prompts=True, filter_overlong_prompts_workers=2)
    dataset = RLHFDataset(path, tokenizer, {**config, "use_shm": True})
    try:
        assert [dataset[j]["index"] for j in range(len(dataset))] == [i for i, n in enumerate(lengths) if n <= limit]
        assert dataset.data_files[0].startswith("/dev/shm/verl-cache/") and dataset.data_files[0] != str(path)
    finally:
        shutil.rmtree(Path(dataset.data_files[0]).parent, ignore_errors=True)


def test_several_files_parquet_and_jsonl_in_order(tokenizer, tmp_path):
    first = write_parquet([make_row(f"p{i}", index=i) for i in range(3)], tmp_path / "a.parquet")
    second = write_jsonl([make_row(f"j{i}", index=10 + i) for i in range(2)], tmp_path / "b.jsonl")
    dataset = RLHFDataset([first, second], tokenizer, data_config())
    assert [dataset[i]["index"] for i in range(len(dataset))] == [0, 1, 2, 10, 11]


def test_max_samples_is_a_deterministic_subset(tokenizer, tmp_path):
    path = write_jsonl([make_row(f"q{i}", index=i) for i in range(20)], tmp_path / "rows.jsonl")
    config = data_config(shuffle=True, seed=3)
    picked = [RLHFDataset(path, tokenizer, config, max_samples=5)[i]["index"] for i in range(5)]
    again = [RLHFDataset(path, tokenizer, config, max_samples=5)[i]["index"] for i in range(5)]
    assert picked == again and len(set(picked)) == 5
    ordered = RLHFDataset(path, tokenizer, data_config(shuffle=False), max_samples=5)
    assert [ordered[i]["index"] for i in range(5)] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    "breaks, field",
    [
        (lambda row: row.pop("reward_model"), "reward_model.ground_truth"),
        (lambda row: row.pop("prompt"), "prompt"),
        (lambda row: row.pop("data_source"), "data_source"),
        (lambda row: row.update(prompt=[{"role": "user"}]), "prompt[].role/content"),
    ],
)
def test_malformed_row_names_file_row_and_field(tokenizer, tmp_path, breaks, field):
    rows = [make_row("ok", index=i) for i in range(4)]
    breaks(rows[2])
    path = write_jsonl(rows, tmp_path / "bad.jsonl")
    with pytest.raises(ValueError) as error:
        RLHFDataset(path, tokenizer, data_config())
    message = str(error.value)
    assert path in message and "row 2" in message and repr(field) in message


def test_bad_config_values_fail_early(tokenizer, tmp_path):
    path = write_jsonl([make_row("ok")], tmp_path / "rows.jsonl")
    with pytest.raises(ValueError, match="data.truncation"):
        RLHFDataset(path, tokenizer, data_config(truncation="sideways"))
    with pytest.raises(FileNotFoundError, match="missing.parquet"):
        RLHFDataset(str(tmp_path / "missing.parquet"), tokenizer, data_config())
