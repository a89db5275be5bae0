"""Write GSM8K as two-turn chats for multi-turn SFT: the question and the worked answer, then a request for
the bare number and its ``#### <number>`` reply.

    python examples/sft/multiturn/prepare_gsm8k_chats.py --gsm8k_dir ~/data/gsm8k --local_save_dir ~/data/gsm8k_chats

Reads the parquet files written by ``examples/data_preprocess/gsm8k.py`` (their ``extra_info`` holds the
question and the answer) and writes ``train.parquet`` / ``test.parquet`` with a ``messages`` column.
"""

from __future__ import annotations

import argparse
import os

import pyarrow as pa
import pyarrow.parquet as pq


def to_chat(row: dict) -> dict:
    info = row["extra_info"]
    return {
        "data_source": row["data_source"],
        "messages": [
            {"role": "system", "content": "You are a careful math tutor."},
            {"role": "user", "content": info["question"]},
            {"role": "assistant", "content": info["answer"].split("####")[0].strip()},
            {"role": "user", "content": "So what is the final answer?"},
            {"role": "assistant", "content": f"#### {row['reward_model']['ground_truth']}"},
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gsm8k_dir", default="~/data/gsm8k", help="folder with train/test.parquet from gsm8k.py")
    parser.add_argument("--local_save_dir", default="~/data/gsm8k_chats")
    args = parser.parse_args()
    source, target = os.path.expanduser(args.gsm8k_dir), os.path.expanduser(args.local_save_dir)
    os.makedirs(target, exist_ok=True)
    for split in ("train", "test"):
        rows = [to_chat(row) for row in pq.read_table(os.path.join(source, f"{split}.parquet")).to_pylist()]
        pq.write_table(pa.Table.from_pylist(rows), os.path.join(target, f"{split}.parquet"))
        print(f"wrote {len(rows)} {split} chats to {target}")


if __name__ == "__main__":
    main()
