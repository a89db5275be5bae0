"""The random Qwen2-VL builder: the ``2b`` shape matches Qwen2-VL-2B-Instruct's published config, and weights
are written in the dtype asked for."""

from __future__ import annotations

import json

import pytest

from tests.support.models import smollm2_path
from verl.models.random_vlm import SHAPES, build_config, build_random_vlm, build_tokenizer

# Qwen/Qwen2-VL-2B-Instruct config.json (text part at the top level, vision_config nested).
QWEN2_VL_2B = {
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "mrope_section": [16, 24, 24],
    "vision": {"depth": 32, "embed_dim": 1280, "num_heads": 16, "mlp_ratio": 4, "hidden_size": 1536},
}


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(smollm2_path())


def test_2b_shape_is_qwen2_vl_2b(tokenizer):
    config = build_config("qwen2_vl", SHAPES["2b"], tokenizer)
    text, vision = config.text_config, config.vision_config
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"):
        assert getattr(text, key) == QWEN2_VL_2B[key], key
    assert text.num_key_value_heads == QWEN2_VL_2B["num_key_value_heads"]
    assert text.vocab_size == QWEN2_VL_2B["vocab_size"] > len(tokenizer)
    assert list(text.rope_parameters["mrope_section"]) == QWEN2_VL_2B["mrope_section"]
    assert config.tie_word_embeddings is True
    for key, value in QWEN2_VL_2B["vision"].items():
        assert getattr(vision, key) == value, key


def test_tiny_keeps_the_tokenizer_vocabulary(tokenizer):
    assert build_config("qwen2_vl", SHAPES["tiny"], tokenizer).text_config.vocab_size == len(tokenizer)


def test_weights_saved_in_the_requested_dtype(tmp_path):
    from safetensors import safe_open

    folder = build_random_vlm(str(tmp_path / "m"), smollm2_path(), "qwen2_vl", "tiny", dtype="bfloat16")
    dtypes = set()
    for path in (tmp_path / "m").glob("*.safetensors"):
        with safe_open(str(path), "pt") as handle:
            dtypes |= {str(handle.get_slice(name).get_dtype()) for name in handle.keys()}
    assert dtypes == {"BF16"}
    assert json.loads((tmp_path / "m" / "processor_config.json").read_text())["processor_class"] == "Qwen2VLProcessor"
    assert folder == str(tmp_path / "m")


def test_padding_id_is_not_the_end_of_turn_token(tmp_path):
    """The pad id is the embedding's padding_idx (a zero row that gets no gradient): with SmolLM2's tokenizer, which
    pads with its EOS ``<|im_end|>``, the end-of-turn token could never learn. The builder pads with
    ``<|endoftext|>`` instead, and the EOS row of the built model is an ordinary, nonzero one."""
    from transformers import AutoModelForImageTextToText

    tokenizer = build_tokenizer(smollm2_path())
    assert tokenizer.pad_token == "<|endoftext|>" and tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token_id != tokenizer.eos_token_id
    folder = build_random_vlm(str(tmp_path / "m"), smollm2_path(), "qwen2_vl", "tiny")
    model = AutoModelForImageTextToText.from_pretrained(folder)
    embedding = model.get_input_embeddings().weight
    assert model.config.text_config.pad_token_id == tokenizer.pad_token_id
    assert embedding[tokenizer.eos_token_id].abs().sum() > 0
    assert embedding[tokenizer.pad_token_id].abs().sum() == 0
