"""Command line: ``python -m verl.model_merger merge --backend fsdp|megatron --local_dir <ckpt> --target_dir <out>``."""

from __future__ import annotations

import argparse
import sys

from verl.model_merger.base_model_merger import MERGER_BACKENDS, ModelMergerConfig, get_model_merger_cls


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m verl.model_merger", description=__doc__)
    sub = parser.add_subparsers(dest="operation", required=True)
    merge = sub.add_parser("merge", help="write a Hugging Face model folder from a checkpoint")
    merge.add_argument(
        "--backend", required=True, help=f"checkpoint format, one of: {', '.join(MERGER_BACKENDS.names())}"
    )
    merge.add_argument("--local_dir", required=True, help="checkpoint folder, e.g. .../global_step_N/actor")
    merge.add_argument("--target_dir", required=True, help="output folder for the Hugging Face model")
    merge.add_argument(
        "--hf_model_path", default=None, help="HF folder for config/tokenizer (default: <local_dir>/huggingface)"
    )
    merge.add_argument("--trust-remote-code", dest="trust_remote_code", action="store_true")
    merge.add_argument("--tie-word-embedding", dest="tie_word_embedding", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = ModelMergerConfig(
        operation=args.operation,
        backend=args.backend,
        local_dir=args.local_dir,
        target_dir=args.target_dir,
        hf_model_path=args.hf_model_path,
        trust_remote_code=args.trust_remote_code,
        tie_word_embedding=args.tie_word_embedding,
    )
    get_model_merger_cls(config.backend)(config).merge_and_save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
