"""Write the built-in visual counting task (count shapes drawn on an image) as train/test parquet.

    python examples/data_preprocess/shapes.py --local_save_dir ~/data/shapes

The defaults give the same rows as ``data.train_files=shapes`` (``builtin://shapes/train`` and ``/test``);
``--max_count`` and ``--image_size`` change the difficulty and the number of image tokens.
"""

from __future__ import annotations

import argparse
import os


def main(argv: list[str] | None = None) -> None:
    from verl.utils.dataset.row_reading import write_parquet
    from verl.utils.dataset.shapes import ShapesSpec, make_split

    defaults = ShapesSpec()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local_save_dir", default="~/data/shapes", help="where train/test.parquet go")
    parser.add_argument("--train_size", type=int, default=defaults.train_size)
    parser.add_argument("--test_size", type=int, default=defaults.test_size)
    parser.add_argument("--image_size", type=int, default=defaults.image_size)
    parser.add_argument("--max_count", type=int, default=defaults.max_count)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    args = parser.parse_args(argv)

    spec = ShapesSpec(args.train_size, args.test_size, args.image_size, args.max_count, args.seed)
    save_dir = os.path.expanduser(args.local_save_dir)
    for split in ("train", "test"):
        rows = make_split(split, spec)
        write_parquet(rows, os.path.join(save_dir, f"{split}.parquet"))
        print(f"wrote {len(rows)} {split} rows to {os.path.join(save_dir, split + '.parquet')}")


if __name__ == "__main__":
    main()
