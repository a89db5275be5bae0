"""Write GSM8K as train/test parquet in verl's row schema.

    python examples/data_preprocess/gsm8k.py --local_save_dir ~/data/gsm8k
    python examples/data_preprocess/gsm8k.py --local_dataset_path ../shared/data/gsm8k --local_save_dir ~/data/gsm8k

Without ``--local_dataset_path`` the data comes from the Hugging Face hub (``openai/gsm8k``, needs the
``datasets`` package and network); with it, from ``train.jsonl`` / ``test.jsonl`` holding ``question``
and ``answer`` fields. The ground truth is the number after ``####`` in the answer, commas removed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

DATA_SOURCE = "openai/gsm8k"
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'


def extract_solution(answer: str) -> str:
    """The number after ``####`` in a GSM8K answer, without thousands separators."""
    match = re.search(r"####\s*(-?[0-9.,]+)", answer)
    if match is None:
        raise ValueError(f"GSM8K answer without '#### <number>': {answer[-80:]!r}")
    return match.group(1).replace(",", "").rstrip(".")


def make_row(example: dict, split: str, index: int) -> dict:
    """One GSM8K example as a verl row."""
    question = example["question"]
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": f"{question} {INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": extract_solution(example["answer"])},
        "extra_info": {"split": split, "index": index, "answer": example["answer"], "question": question},
    }


def load_split(split: str, local_dataset_path: str | None) -> list[dict]:
    """Examples of ``split`` from ``<local_dataset_path>/<split>.jsonl`` or the hub."""
    if local_dataset_path:
        path = os.path.join(os.path.expanduser(local_dataset_path), f"{split}.jsonl")
        with open(path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    try:
        import datasets
    except ImportError:
        sys.exit("loading from the hub needs `pip install datasets`; or pass --local_dataset_path <folder of jsonl>")
    return list(datasets.load_dataset("openai/gsm8k", "main")[split])


def main(argv: list[str] | None = None, row_fn=make_row, save_dir: str = "~/data/gsm8k", doc: str = __doc__) -> None:
    """Write both splits with ``row_fn(example, split, index)`` (other GSM8K layouts reuse this with their own)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--local_dataset_path", default=None, help="folder with train.jsonl and test.jsonl")
    parser.add_argument("--local_save_dir", default=save_dir, help="where train/test.parquet are written")
    parser.add_argument("--local_dir", default=None, help="verl's older name of --local_save_dir")
    parser.add_argument("--hdfs_dir", default=None, help="also copy the parquet folder there (hdfs:// or local)")
    parser.add_argument("--max_samples", type=int, default=-1, help="keep only the first N rows of each split")
    args = parser.parse_args(argv)

    from verl.utils.dataset.row_reading import write_parquet
    from verl.utils.hdfs_io import copy, makedirs

    save_dir = os.path.expanduser(args.local_dir or args.local_save_dir)
    for split in ("train", "test"):
        examples = load_split(split, args.local_dataset_path)
        if args.max_samples > 0:
            examples = examples[: args.max_samples]
        rows = [row_fn(example, split, index) for index, example in enumerate(examples)]
        write_parquet(rows, os.path.join(save_dir, f"{split}.parquet"))
        print(f"wrote {len(rows)} {split} rows to {os.path.join(save_dir, split + '.parquet')}")
    if args.hdfs_dir is not None:
        makedirs(args.hdfs_dir, exist_ok=True)
        copy(src=save_dir, dst=args.hdfs_dir)


if __name__ == "__main__":
    main()
