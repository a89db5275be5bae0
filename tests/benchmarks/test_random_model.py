"""``benchmarks.gpu.random_model``: a model derived from a folder's config with fields replaced, its tokenizer kept,
random weights in bf16; the loop2 presets run their TP=2 engines on one (SmolLM2's 9 heads do not split in two)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from benchmarks.gpu.random_model import derive, folder_name, main, parse_fields
from tests.support.models import tiny_model_path


def test_parse_fields_reads_json_values_and_names_a_bad_entry():
    assert parse_fields(["hidden_size=512", "rope_scaling=null", "hidden_act=silu"]) == {
        "hidden_size": 512,
        "rope_scaling": None,
        "hidden_act": "silu",
    }
    with pytest.raises(ValueError, match="'hidden_size' is not key=value"):
        parse_fields(["hidden_size"])


def test_folder_name_depends_on_the_fields_only_through_their_values():
    one = folder_name("/models/SmolLM2", {"a": 1, "b": 2})
    assert one == folder_name("/other/SmolLM2", {"b": 2, "a": 1})
    assert one.startswith("SmolLM2-random-") and one != folder_name("/models/SmolLM2", {"a": 1, "b": 3})


def test_derive_replaces_the_heads_and_keeps_the_rest(tmp_path):
    base = tiny_model_path()  # 4 query / 2 KV heads of dim 16, hidden 64
    target = tmp_path / "derived"
    assert main([base, str(target), "hidden_size=32", "num_attention_heads=2", "num_key_value_heads=1"]) == 0
    config, base_config = AutoConfig.from_pretrained(target), AutoConfig.from_pretrained(base)
    assert (config.hidden_size, config.num_attention_heads, config.num_key_value_heads) == (32, 2, 1)
    assert config.head_dim == 16
    assert config.num_hidden_layers == base_config.num_hidden_layers
    assert config.vocab_size == base_config.vocab_size
    model = AutoModelForCausalLM.from_pretrained(target)
    assert model.model.layers[0].self_attn.k_proj.weight.shape == (16, 32)  # one KV head of dim 16
    assert AutoTokenizer.from_pretrained(target).encode("2 + 3 =") == AutoTokenizer.from_pretrained(base).encode(
        "2 + 3 ="
    )
    weights = AutoModelForCausalLM.from_pretrained(target, dtype="auto").model.embed_tokens.weight
    assert weights.dtype == torch.bfloat16
    # written once: a second call keeps the folder as it is
    stamp = (target / "config.json").stat().st_mtime_ns
    derive(base, {"hidden_size": 32, "num_attention_heads": 2, "num_key_value_heads": 1}, target)
    assert (target / "config.json").stat().st_mtime_ns == stamp


def test_derive_names_a_field_the_config_lacks(tmp_path):
    with pytest.raises(ValueError, match=r"has no fields \['num_heads_typo'\]"):
        derive(tiny_model_path(), {"num_heads_typo": 8}, tmp_path / "x")
