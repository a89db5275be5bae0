"""Hand-made rows in verl's schema and writers for them."""

import json

import pyarrow as pa
import pyarrow.parquet as pq


def make_row(content: str, answer: str = "1", index: int = 0, source: str = "test/source") -> dict:
    return {
        "data_source": source,
        "prompt": [{"role": "user", "content": content}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": answer},
        "extra_info": {"split": "train", "index": index},
    }


def write_jsonl(rows, path) -> str:
    with open(path, "w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    return str(path)


def write_parquet(rows, path) -> str:
    pq.write_table(pa.Table.from_pylist(rows), str(path))
    return str(path)
