"""Hugging Face <-> megatron-core weight names and layouts (full, unsharded tensors).

megatron-core keys use the global decoder layer index (``decoder.layers.{i}.…``); the builder maps them to the
local index of the pipeline chunk that holds the layer. Layout differences (exact reshapes, so a round trip is
bit-identical):

* ``linear_qkv`` fuses q, k and v per key/value group ``g``: rows ``[q heads of g; k_g; v_g]`` for g = 0..G-1
  (``G = num_key_value_heads``, ``num_attention_heads / G`` query heads per group, ``head_dim`` rows each);
* ``linear_fc1`` stacks ``[gate_proj; up_proj]`` (megatron-core's SwiGLU: ``silu(first half) * second half``);
* ``input_layernorm`` / ``pre_mlp_layernorm`` are HF's ``input_layernorm`` / ``post_attention_layernorm``;
* with tied embeddings (``tie_word_embeddings``) there is no separate output weight;
* a value model's head (HF ``score``, ``*ForTokenClassification`` with one label) is ``output_layer``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch

from verl.models.mcore.config_converter import head_dim

LAYER_PREFIX = "decoder.layers."

# megatron-core name inside a layer -> Hugging Face name inside ``model.layers.{i}.`` (one-to-one entries)
_LAYER_DIRECT = {
    "input_layernorm.weight": "input_layernorm.weight",
    "self_attention.linear_proj.weight": "self_attn.o_proj.weight",
    "pre_mlp_layernorm.weight": "post_attention_layernorm.weight",
    "mlp.linear_fc2.weight": "mlp.down_proj.weight",
}
_QKV = {"self_attention.linear_qkv.weight": "weight", "self_attention.linear_qkv.bias": "bias"}
_FC1 = "mlp.linear_fc1.weight"


def is_value_model(hf_config: Any) -> bool:
    """True for a one-label ``*ForTokenClassification`` config (the critic)."""
    architectures = getattr(hf_config, "architectures", None) or []
    return any(a.endswith("ForTokenClassification") for a in architectures)


def is_tied(hf_config: Any) -> bool:
    """True when the LM head reuses the input embedding (never for a value model)."""
    return bool(getattr(hf_config, "tie_word_embeddings", False)) and not is_value_model(hf_config)


def _has_qkv_bias(hf_config: Any) -> bool:
    return hf_config.model_type == "qwen2"


def layer_param_names(hf_config: Any) -> list[str]:
    """megatron-core names inside one decoder layer, in a fixed order."""
    names = ["input_layernorm.weight", "self_attention.linear_qkv.weight"]
    if _has_qkv_bias(hf_config):
        names.append("self_attention.linear_qkv.bias")
    return names + ["self_attention.linear_proj.weight", "pre_mlp_layernorm.weight", _FC1, "mlp.linear_fc2.weight"]


def mcore_param_names(hf_config: Any) -> list[str]:
    """Every megatron-core tensor of the full model (global layer indices), embedding first, head last."""
    names = ["embedding.word_embeddings.weight"]
    for layer in range(hf_config.num_hidden_layers):
        names += [f"{LAYER_PREFIX}{layer}.{name}" for name in layer_param_names(hf_config)]
    names.append("decoder.final_layernorm.weight")
    if is_value_model(hf_config):
        names += ["output_layer.weight", "output_layer.bias"]
    elif not is_tied(hf_config):
        names.append("output_layer.weight")
    return names


def split_layer_name(name: str) -> tuple[int | None, str]:
    """``decoder.layers.3.mlp.linear_fc1.weight`` -> ``(3, "mlp.linear_fc1.weight")``; ``(None, name)`` outside
    the decoder layers."""
    if not name.startswith(LAYER_PREFIX):
        return None, name
    index, _, rest = name[len(LAYER_PREFIX) :].partition(".")
    return int(index), rest


def hf_names(name: str, hf_config: Any) -> list[str]:
    """Hugging Face tensors that make up the megatron-core tensor ``name`` (in fusion order)."""
    layer, rest = split_layer_name(name)
    if layer is None:
        if name == "embedding.word_embeddings.weight":
            return ["model.embed_tokens.weight"]
        if name == "decoder.final_layernorm.weight":
            return ["model.norm.weight"]
        if name.startswith("output_layer."):
            kind = name.rsplit(".", 1)[1]
            return [f"score.{kind}"] if is_value_model(hf_config) else ["lm_head.weight"]
        raise KeyError(f"unknown megatron-core tensor {name!r}")
    prefix = f"model.layers.{layer}."
    if rest in _LAYER_DIRECT:
        return [prefix + _LAYER_DIRECT[rest]]
    if rest in _QKV:
        kind = _QKV[rest]
        return [f"{prefix}self_attn.{p}_proj.{kind}" for p in ("q", "k", "v")]
    if rest == _FC1:
        return [prefix + "mlp.gate_proj.weight", prefix + "mlp.up_proj.weight"]
    raise KeyError(f"unknown megatron-core tensor {name!r}")


def _qkv_shape(hf_config: Any) -> tuple[int, int, int]:
    """``(groups, query heads per group, head_dim)``."""
    heads = hf_config.num_attention_heads
    groups = getattr(hf_config, "num_key_value_heads", None) or heads
    return groups, heads // groups, head_dim(hf_config)


def fuse(name: str, tensors: list[torch.Tensor], hf_config: Any) -> torch.Tensor:
    """The megatron-core tensor ``name`` from its Hugging Face parts (as listed by :func:`hf_names`)."""
    _, rest = split_layer_name(name)
    if rest in _QKV:
        q, k, v = tensors
        groups, per_group, dim = _qkv_shape(hf_config)
        tail = q.shape[1:]
        stacked = torch.cat(
            [q.reshape(groups, per_group * dim, *tail), k.reshape(groups, dim, *tail), v.reshape(groups, dim, *tail)],
            dim=1,
        )
        return stacked.reshape(groups * (per_group + 2) * dim, *tail)
    if rest == _FC1:
        return torch.cat(tensors, dim=0)
    (tensor,) = tensors
    return tensor


def unfuse(name: str, tensor: torch.Tensor, hf_config: Any) -> list[torch.Tensor]:
    """Inverse of :func:`fuse`: the Hugging Face parts of the megatron-core tensor ``name``."""
    _, rest = split_layer_name(name)
    if rest in _QKV:
        groups, per_group, dim = _qkv_shape(hf_config)
        tail = tensor.shape[1:]
        grouped = tensor.reshape(groups, (per_group + 2) * dim, *tail)
        q, k, v = torch.split(grouped, [per_group * dim, dim, dim], dim=1)
        return [
            q.reshape(groups * per_group * dim, *tail),
            k.reshape(groups * dim, *tail),
            v.reshape(groups * dim, *tail),
        ]
    if rest == _FC1:
        return list(torch.chunk(tensor, 2, dim=0))
    return [tensor]


def to_hf(name: str, tensor: torch.Tensor, hf_config: Any) -> list[tuple[str, torch.Tensor]]:
    """``[(hf_name, tensor)]`` for one full megatron-core tensor."""
    return list(zip(hf_names(name, hf_config), unfuse(name, tensor, hf_config), strict=True))


def hf_to_mcore(hf_state: dict[str, torch.Tensor], hf_config: Any) -> dict[str, torch.Tensor]:
    """Full megatron-core state dict from a Hugging Face one (``lm_head.weight`` of a tied model is ignored)."""
    missing = [n for name in mcore_param_names(hf_config) for n in hf_names(name, hf_config) if n not in hf_state]
    if missing:
        raise KeyError(f"Hugging Face weights lack {missing[:4]} (of {len(missing)}) for {hf_config.model_type}")
    return {
        name: fuse(name, [hf_state[n] for n in hf_names(name, hf_config)], hf_config)
        for name in mcore_param_names(hf_config)
    }


def iter_mcore_to_hf(pairs: Iterable[tuple[str, torch.Tensor]], hf_config: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """Stream ``(hf_name, tensor)`` for a stream of full ``(mcore_name, tensor)`` pairs."""
    for name, tensor in pairs:
        yield from to_hf(name, tensor, hf_config)


def mcore_to_hf(mcore_state: dict[str, torch.Tensor], hf_config: Any) -> dict[str, torch.Tensor]:
    """Hugging Face state dict (no ``lm_head.weight`` when tied) from a full megatron-core one."""
    return dict(iter_mcore_to_hf(mcore_state.items(), hf_config))
