"""Write the MATH benchmark (Hendrycks et al., 2021) as train/test parquet in verl's row schema.

    python examples/data_preprocess/math_dataset.py --local_save_dir ~/data/math
    python examples/data_preprocess/math_dataset.py --local_dataset_path <folder> --local_save_dir ~/data/math

Without ``--local_dataset_path`` the data comes from the hub (``DigitalLearningGmbH/MATH-lighteval``,
needs ``datasets``); with it, from ``train.jsonl`` / ``test.jsonl`` holding ``problem`` and
``solution`` fields. The ground truth is the content of the solution's last ``\\boxed{}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

DATA_SOURCE = "DigitalLearningGmbH/MATH-lighteval"
INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."


def make_row(example: dict, split: str, index: int) -> dict:
    """One MATH example as a verl row."""
    from verl.utils.reward_score.math import last_boxed_only_string, remove_boxed

    boxed = last_boxed_only_string(example["solution"])
    if boxed is None:
        raise ValueError(f"{split} example {index}: the solution has no \\boxed{{}} answer")
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": f"{example['problem']} {INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": remove_boxed(boxed)},
        "extra_info": {"split": split, "index": index},
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
    return list(datasets.load_dataset(DATA_SOURCE, trust_remote_code=True)[split])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local_dataset_path", default=None, help="folder with train.jsonl and test.jsonl")
    parser.add_argument("--local_save_dir", default="~/data/math", help="where train/test.parquet are written")
    parser.add_argument("--max_samples", type=int, default=-1, help="keep only the first N rows of each split")
    args = parser.parse_args(argv)

    from verl.utils.dataset.row_reading import write_parquet

    save_dir = os.path.expanduser(args.local_save_dir)
    for split in ("train", "test"):
        examples = load_split(split, args.local_dataset_path)
        if args.max_samples > 0:
            examples = examples[: args.max_samples]
        rows = [make_row(example, split, index) for index, example in enumerate(examples)]
        write_parquet(rows, os.path.join(save_dir, f"{split}.parquet"))
        print(f"wrote {len(rows)} {split} rows to {os.path.join(save_dir, split + '.parquet')}")


if __name__ == "__main__":
    main()
