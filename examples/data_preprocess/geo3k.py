"""Write Geometry3K (``hiyouga/geometry3k``) as train/test parquet in verl's multimodal row schema.

    python examples/data_preprocess/geo3k.py --local_save_dir ~/data/geo3k
    python examples/data_preprocess/geo3k.py --local_dataset_path ./geometry3k --local_save_dir ~/data/geo3k

Without ``--local_dataset_path`` the data comes from the Hugging Face hub (needs the ``datasets`` package and
network); with it, from ``<split>.parquet`` files holding ``problem``, ``answer`` and ``images`` columns (the
hub dataset's layout; ``images`` entries are ``{"bytes", "path"}``). Each prompt asks for reasoning in
``<think>`` tags and the answer in ``\\boxed{}``, as the ``geo3k`` scorer expects; the problem text keeps its
``<image>`` marker, which the dataset turns into the image's place in the chat template.
"""

from __future__ import annotations

import argparse
import os
import sys

DATA_SOURCE = "hiyouga/geometry3k"
INSTRUCTION = (
    "You FIRST think about the reasoning process as an internal monologue and then provide the final answer. "
    "The reasoning process MUST BE enclosed within <think> </think> tags. The final answer MUST BE put in \\boxed{}."
)
SPLITS = {"train": "train", "test": "test"}


def make_row(example: dict, split: str, index: int) -> dict:
    """One Geometry3K example as a verl row (``<image>`` is prepended when the problem has no marker)."""
    problem = example["problem"]
    if "<image>" not in problem:
        problem = "<image>" + problem
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": f"{problem} {INSTRUCTION}"}],
        "images": list(example["images"]),
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": example["answer"]},
        "extra_info": {"split": split, "index": index, "answer": example["answer"], "question": example["problem"]},
    }


def load_split(split: str, local_dataset_path: str | None) -> list[dict]:
    """Examples of ``split`` from ``<local_dataset_path>/<split>.parquet`` or the hub."""
    if local_dataset_path:
        from verl.utils.dataset.row_reading import read_rows

        return read_rows(os.path.join(os.path.expanduser(local_dataset_path), f"{split}.parquet"))
    try:
        import datasets
    except ImportError:
        sys.exit("loading from the hub needs `pip install datasets`; or pass --local_dataset_path <folder of parquet>")
    return list(datasets.load_dataset(DATA_SOURCE)[SPLITS[split]])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local_dataset_path", default=None, help="folder with train.parquet and test.parquet")
    parser.add_argument("--local_save_dir", default="~/data/geo3k", help="where train/test.parquet are written")
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
