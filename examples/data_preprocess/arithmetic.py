"""Write the built-in arithmetic task (sums and differences) as train/test parquet in verl's row schema.

    python examples/data_preprocess/arithmetic.py --local_save_dir ~/data/arithmetic

The defaults give the same rows as ``data.train_files=builtin://arithmetic/train`` (and ``/test``);
``--num_operands`` and ``--max_operand`` make it harder or easier.
"""

from __future__ import annotations

import argparse
import os


def main(argv: list[str] | None = None) -> None:
    from verl.utils.dataset.arithmetic import ArithmeticSpec, make_split
    from verl.utils.dataset.row_reading import write_parquet

    defaults = ArithmeticSpec()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local_save_dir", default="~/data/arithmetic", help="where train/test.parquet go")
    parser.add_argument("--train_size", type=int, default=defaults.train_size)
    parser.add_argument("--test_size", type=int, default=defaults.test_size)
    parser.add_argument("--num_operands", type=int, default=defaults.num_operands)
    parser.add_argument("--max_operand", type=int, default=defaults.max_operand)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    args = parser.parse_args(argv)

    spec = ArithmeticSpec(args.train_size, args.test_size, args.num_operands, args.max_operand, args.seed)
    save_dir = os.path.expanduser(args.local_save_dir)
    for split in ("train", "test"):
        rows = make_split(split, spec)
        write_parquet(rows, os.path.join(save_dir, f"{split}.parquet"))
        print(f"wrote {len(rows)} {split} rows to {os.path.join(save_dir, split + '.parquet')}")


if __name__ == "__main__":
    main()
