"""HF <-> megatron-core weight conversion and tensor-parallel splitting (single process, no megatron-core).

* HF -> mcore -> HF is bit-identical for Llama (tied embeddings, GQA), Qwen2 (QKV bias, untied head) and a
  one-label value model;
* the fused QKV rows follow megatron-core's group-major layout, built here by hand from the q/k/v rows;
* splitting a full tensor for tensor-parallel ranks then merging is the identity, and every rank's QKV/fc1
  shard holds exactly its heads / MLP columns.
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig

from tests.support.models import tiny_model_path
from verl.models.mcore.config_converter import ParallelSizes, check_supported
from verl.models.mcore.tp_split import tp_merge, tp_shard
from verl.models.mcore.weight_converter import hf_to_mcore, is_value_model, mcore_param_names, mcore_to_hf


def _hf(arch: str):
    path = tiny_model_path(arch)
    return AutoConfig.from_pretrained(path), load_file(f"{path}/model.safetensors")


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_round_trip_is_bit_identical(arch):
    config, state = _hf(arch)
    mcore = hf_to_mcore(state, config)
    back = mcore_to_hf(mcore, config)
    expected = {k: v for k, v in state.items() if not (config.tie_word_embeddings and k == "lm_head.weight")}
    assert back.keys() == expected.keys()
    for name, tensor in expected.items():
        assert back[name].dtype == tensor.dtype and torch.equal(back[name], tensor), name


def test_value_model_round_trip_maps_score_to_output_layer():
    config, state = _hf("llama")
    config.architectures = ["LlamaForTokenClassification"]
    assert is_value_model(config)
    state = {k: v for k, v in state.items() if k != "lm_head.weight"}
    state["score.weight"], state["score.bias"] = torch.randn(1, config.hidden_size), torch.randn(1)
    mcore = hf_to_mcore(state, config)
    assert torch.equal(mcore["output_layer.weight"], state["score.weight"])
    back = mcore_to_hf(mcore, config)
    assert back.keys() == state.keys() and all(torch.equal(back[k], state[k]) for k in state)


def test_qkv_layout_is_group_major():
    config, state = _hf("qwen2")
    mcore = hf_to_mcore(state, config)
    d, heads, groups = config.head_dim, config.num_attention_heads, config.num_key_value_heads
    per_group = heads // groups
    q, k, v = (state[f"model.layers.1.self_attn.{p}_proj.weight"] for p in "qkv")
    rows = []
    for g in range(groups):
        for h in range(g * per_group, (g + 1) * per_group):
            rows.append(q[h * d : (h + 1) * d])
        rows += [k[g * d : (g + 1) * d], v[g * d : (g + 1) * d]]
    assert torch.equal(mcore["decoder.layers.1.self_attention.linear_qkv.weight"], torch.cat(rows))
    bias = state["model.layers.1.self_attn.k_proj.bias"]
    fused_bias = mcore["decoder.layers.1.self_attention.linear_qkv.bias"]
    assert torch.equal(fused_bias[per_group * d : (per_group + 1) * d], bias[:d])


def test_tensor_parallel_split_and_merge():
    config, state = _hf("llama")
    mcore = hf_to_mcore(state, config)
    d, per_group, ffn = (
        config.head_dim,
        config.num_attention_heads // config.num_key_value_heads,
        config.intermediate_size,
    )
    for name in mcore_param_names(config):
        full = mcore[name]
        shards = [tp_shard(name, full, r, 2) for r in range(2)]
        assert torch.equal(tp_merge(name, shards), full), name
    qkv = mcore["decoder.layers.0.self_attention.linear_qkv.weight"]
    group_rows = (per_group + 2) * d
    assert torch.equal(tp_shard("decoder.layers.0.self_attention.linear_qkv.weight", qkv, 1, 2), qkv[group_rows:])
    fc1 = mcore["decoder.layers.0.mlp.linear_fc1.weight"]
    shard = tp_shard("decoder.layers.0.mlp.linear_fc1.weight", fc1, 1, 2)
    gate, up = state["model.layers.0.mlp.gate_proj.weight"], state["model.layers.0.mlp.up_proj.weight"]
    assert torch.equal(shard, torch.cat([gate[ffn // 2 :], up[ffn // 2 :]]))
    proj = tp_shard(
        "decoder.layers.0.self_attention.linear_proj.weight",
        mcore["decoder.layers.0.self_attention.linear_proj.weight"],
        0,
        2,
    )
    assert torch.equal(proj, state["model.layers.0.self_attn.o_proj.weight"][:, : config.hidden_size // 2])


def test_unsupported_layouts_name_the_problem():
    config, _ = _hf("llama")
    assert check_supported(config, ParallelSizes(tensor=2, pipeline=2)) == []
    problems = check_supported(config, ParallelSizes(tensor=4, pipeline=3))
    assert any("key/value heads" in p for p in problems) and any("decoder layers" in p for p in problems)
    config.model_type = "gpt2"
    assert "not supported" in check_supported(config, ParallelSizes())[0]
