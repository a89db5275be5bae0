"""A random-weight model derived from a model folder: its ``config.json`` with some fields replaced, its tokenizer,
weights drawn with seed 0 and saved in bf16. For runs the real model cannot take: SmolLM2's 9 query / 3 KV heads do
not split over two tensor-parallel ranks, a model of its depth and vocabulary with 8 / 2 heads does.

    python -m benchmarks.gpu.random_model BASE_FOLDER OUT_FOLDER hidden_size=512 num_attention_heads=8 ...

A random model rarely samples its EOS token, so each response runs to ``max_response_length``: its runs compare with
each other, not with the real model's.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path


def parse_fields(entries: list[str]) -> dict:
    """``["key=value", ...]`` -> ``{key: value}``, each value read as JSON when it parses (numbers, booleans)."""
    fields = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        if not sep or not key:
            raise ValueError(f"{entry!r} is not key=value")
        try:
            fields[key] = json.loads(value)
        except json.JSONDecodeError:
            fields[key] = value
    return fields


def folder_name(base: str, fields: dict) -> str:
    """``<base name>-random-<8 hex digits of the fields>``: one folder per (base, fields)."""
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:8]
    return f"{Path(base).name}-random-{digest}"


def derive(base: str, fields: dict, target: Path) -> Path:
    """Write the derived model to ``target`` (once: an existing complete folder is kept)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from verl.utils.fs import write_folder_once

    if (target / "config.json").exists() and any(target.glob("*.safetensors")):
        return target
    config = AutoConfig.from_pretrained(base)
    unknown = sorted(key for key in fields if not hasattr(config, key))
    if unknown:
        raise ValueError(f"{base}'s config has no fields {unknown}")
    for key, value in fields.items():
        setattr(config, key, value)
    if "hidden_size" in fields or "num_attention_heads" in fields:
        config.head_dim = config.hidden_size // config.num_attention_heads
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)

    def save(folder: Path) -> None:
        model.save_pretrained(folder, safe_serialization=True)
        AutoTokenizer.from_pretrained(base).save_pretrained(folder)

    return Path(write_folder_once(target, save))


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    base, out, fields = argv[0], Path(argv[1]), parse_fields(argv[2:])
    print(derive(base, fields, out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
