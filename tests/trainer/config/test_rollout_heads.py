"""``actor_rollout_ref.rollout.tensor_model_parallel_size`` against the model's attention heads, checked from its
``config.json`` before Ray or any engine starts (session 28's 2-GPU call lost two runs to a TP=2 engine refusing
SmolLM2's 9 heads after Ray, the actor and the engine had started)."""

from __future__ import annotations

import pytest

from tests.support.models import smollm2_path, with_heads
from verl.trainer.config.loader import load_config
from verl.trainer.config.validation import ConfigError

TP2 = ["actor_rollout_ref.rollout.tensor_model_parallel_size=2", "trainer.n_gpus_per_node=2"]


def _error(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(overrides)
    return str(info.value)


def _with_heads(tmp_path, heads: int, kv_heads: int) -> str:
    return with_heads(tmp_path / f"model-{heads}-{kv_heads}", heads, kv_heads)


def test_the_default_models_nine_heads_do_not_split_in_two():
    smollm2_path()  # the embedded model's config.json on disk (9 query, 3 KV heads)
    message = _error(TP2)
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size=2 must divide the model's 9 attention heads" in message
    assert "use one of [1, 3, 9]" in message
    assert "(model default)" in message  # the model is named


def test_kv_heads_that_tp_neither_divides_nor_multiplies_are_refused(tmp_path):
    # 12 query heads split in 4, but 3 KV heads neither split in 4 nor replicate evenly over 4 ranks
    message = _error(
        [
            "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
            "trainer.n_gpus_per_node=4",
            f"actor_rollout_ref.model.path={_with_heads(tmp_path, 12, 3)}",
        ]
    )
    assert "tensor_model_parallel_size=4 must divide the model's 3 KV heads or be a multiple of them" in message


@pytest.mark.parametrize("heads, kv_heads", [(8, 2), (4, 1)])  # KV heads split in two, or one replicated
def test_heads_that_split_pass(tmp_path, heads, kv_heads):
    cfg = load_config([*TP2, f"actor_rollout_ref.model.path={_with_heads(tmp_path, heads, kv_heads)}"])
    assert cfg.actor_rollout_ref.rollout.tensor_model_parallel_size == 2


def test_tp1_never_reads_the_model(tmp_path):
    # 9 heads at TP=1: nothing to split, whatever the model
    cfg = load_config([f"actor_rollout_ref.model.path={_with_heads(tmp_path, 9, 3)}"])
    assert cfg.actor_rollout_ref.rollout.tensor_model_parallel_size == 1
