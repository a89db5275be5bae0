"""Pad a Llama/Qwen2 checkpoint's attention heads so tensor parallelism of size ``tp`` can split them.

megatron-core splits whole query heads and key/value groups over the tensor-parallel ranks, so both counts must
divide by ``tp`` (SmolLM2-135M has 9 query / 3 key-value heads: no even split). This writes a copy whose key/value
groups are padded with all-zero groups up to a multiple of ``tp``, each with its query heads: zero rows of
``q_proj``/``k_proj``/``v_proj`` and zero columns of ``o_proj``. It computes the same function: a zero query head
attends uniformly to zero values and its zero output columns add nothing; its gradients are zero as well, so
training keeps it zero and the trained weights stay loadable into the original shape by dropping the padding.

    python -m verl.models.mcore.pad_heads --src default --tp 2 --out ~/models/SmolLM2-135M-Instruct-tp2
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from pathlib import Path

import torch


def _config(src: str) -> dict:
    return json.loads((Path(src) / "config.json").read_text())


def _resolve(src: str) -> str:
    from verl.workers.config.model import resolve_model_path

    return resolve_model_path(src)


def needs_padding(src: str, tp: int) -> bool:
    """True when the heads of the model at ``src`` do not split over ``tp`` ranks."""
    config = _config(_resolve(src))
    heads = config["num_attention_heads"]
    return (config.get("num_key_value_heads") or heads) % tp != 0 or heads % tp != 0


def pad_heads(src: str, out: str, tp: int) -> str:
    """Write the padded copy of the model at ``src`` (a folder with ``model.safetensors``) to ``out``."""
    from safetensors.torch import load_file, save_file

    src = _resolve(src)
    raw = _config(src)
    heads = raw["num_attention_heads"]
    groups = raw.get("num_key_value_heads") or heads
    per_group = heads // groups
    padded = math.ceil(groups / tp) * tp
    head_dim = raw.get("head_dim") or raw["hidden_size"] // heads
    extra_q, extra_kv = (padded - groups) * per_group * head_dim, (padded - groups) * head_dim
    state = load_file(str(Path(src) / "model.safetensors"))

    def pad_rows(tensor: torch.Tensor, rows: int) -> torch.Tensor:
        return torch.cat([tensor, tensor.new_zeros(rows, *tensor.shape[1:])])

    for name in list(state):
        if name.endswith(("self_attn.q_proj.weight", "self_attn.q_proj.bias")):
            state[name] = pad_rows(state[name], extra_q)
        elif name.endswith(("self_attn.k_proj.weight", "self_attn.v_proj.weight", "k_proj.bias", "v_proj.bias")):
            state[name] = pad_rows(state[name], extra_kv)
        elif name.endswith("self_attn.o_proj.weight"):
            state[name] = torch.cat([state[name], state[name].new_zeros(state[name].shape[0], extra_q)], dim=1)
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in state.items()}, str(target / "model.safetensors"), {"format": "pt"})
    raw.update(num_attention_heads=padded * per_group, num_key_value_heads=padded, head_dim=head_dim)
    (target / "config.json").write_text(json.dumps(raw, indent=2))
    for extra in Path(src).iterdir():
        if extra.is_file() and extra.name not in ("config.json", "model.safetensors"):
            shutil.copy(extra, target / extra.name)
    return str(target)


def drop_padding(
    state: dict[str, torch.Tensor], original_shapes: dict[str, torch.Size]
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``(kept, padding)``: the padded model's tensors cut back to the original model's shapes (the padding sits at
    the end of every padded dimension), and what was cut, flattened per tensor (zero while training leaves the
    padded heads alone). Names missing from ``original_shapes`` are left out."""
    kept, padding = {}, {}
    for name, tensor in state.items():
        shape = original_shapes.get(name)
        if shape is None:
            continue
        if tuple(tensor.shape) == tuple(shape):
            kept[name] = tensor
            continue
        if tensor.dim() != len(shape) or any(n < m for n, m in zip(tensor.shape, shape, strict=True)):
            raise ValueError(f"{name}: padded shape {tuple(tensor.shape)} cannot hold the original {tuple(shape)}")
        cut = tuple(slice(0, m) for m in shape)
        kept[name] = tensor[cut]
        mask = torch.ones(tensor.shape, dtype=torch.bool, device=tensor.device)
        mask[cut] = False
        padding[name] = tensor[mask]
    return kept, padding


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl.models.mcore.pad_heads", description=__doc__.split("\n")[0])
    parser.add_argument("--src", required=True, help="model folder, or 'default' for the embedded SmolLM2")
    parser.add_argument("--tp", type=int, required=True, help="tensor-parallel size the heads must split over")
    parser.add_argument("--out", required=True, help="output folder")
    args = parser.parse_args(argv)
    if not needs_padding(args.src, args.tp):
        print(f"{args.src}: heads already divide by {args.tp}; nothing to do")
        return 0
    print(pad_heads(args.src, args.out, args.tp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
