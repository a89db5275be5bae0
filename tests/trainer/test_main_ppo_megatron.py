"""End to end through ``python -m verl.trainer.main_ppo --config-name ppo_megatron_trainer`` on 2 CPU workers:
2 PPO steps with the actor, the reference (KL loss), a GAE critic and a reward model (in the actor's processes, its
own tokenizer and chat template, added to the rule reward) on the Megatron engine at TP=2, the HF rollout taking
the gathered weights; and a Megatron layout that does not fit the model fails before Ray starts."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.models import tiny_model_path
from tests.trainer.main_ppo_runner import (
    assert_finite,
    describe,
    main_ppo_command,
    main_ppo_env,
    run_main_ppo,
    short_ray_tmpdir,
    tiny_overrides,
)
from tests.trainer.test_main_ppo import COMMON_KEYS, CRITIC_KEYS
from tests.workers.reward_model.helpers import save_sequence_classifier

pytest.importorskip("megatron.core")
MEGATRON = ["--config-name=ppo_megatron_trainer", "actor_rollout_ref.actor.megatron.sequence_parallel=False"]


def _tp2_overrides(tmp_path) -> list[str]:
    overrides = [o for o in tiny_overrides(tiny_model_path("llama"), tmp_path, rollout="hf") if "n_gpus" not in o]
    return (
        MEGATRON
        + overrides
        + ["trainer.n_gpus_per_node=2", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"]
    )


@pytest.mark.slow
def test_ppo_with_critic_kl_and_reward_model_on_megatron_tp2(tmp_path, shared_ray):
    """One run for the actor, the reference (KL loss), the critic and the reward model on the Megatron engine."""
    rm_path = save_sequence_classifier(tmp_path / "rm", tokenizer_variant=True)  # re-rendered with its own template
    overrides = _tp2_overrides(tmp_path) + [
        "algorithm.adv_estimator=gae",
        "critic.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.01",
        "reward_model.enable=True",
        f"reward_model.model.path={rm_path}",
        "reward_model.micro_batch_size_per_gpu=4",
        "+reward_model.combine.weights={rule: 1.0, model: 0.5}",
    ]
    proc, records = run_main_ppo(overrides, tmp_path, timeout=900, extra_env=shared_ray.env())
    assert proc.returncode == 0, describe(proc)
    assert [r["step"] for r in records] == [0, 1, 2]
    for record in records[1:]:
        data = record["data"]
        missing = sorted((COMMON_KEYS | CRITIC_KEYS | {"actor/kl_loss", "timing_s/ref"}) - data.keys())
        assert not missing, f"step {record['step']} lacks {missing}"
        assert_finite(record)
        assert data["actor/grad_norm"] > 0 and data["critic/grad_norm"] > 0
        assert data["reward/model/min"] < data["reward/model/max"]  # the reward model tells responses apart
        assert data["reward/model/truncated"] == 0
        expected = data["reward/rule/mean"] + 0.5 * data["reward/model/mean"]
        assert data["critic/score/mean"] == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_megatron_layout_that_does_not_fit_fails_before_ray(tmp_path):
    ray_tmpdir = short_ray_tmpdir()
    overrides = MEGATRON + [
        f"actor_rollout_ref.model.path={tiny_model_path('llama')}",
        "trainer.device=cpu",
        "trainer.n_gpus_per_node=4",
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4",
    ]
    proc = subprocess.run(
        main_ppo_command(overrides),
        cwd=tmp_path,
        env=main_ppo_env(tmp_path / "metrics.jsonl", ray_tmpdir),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "tensor_model_parallel_size=4 must divide the attention heads (4) and the key/value heads (2)" in proc.stderr
    assert "Nothing was started" in proc.stderr
    assert os.listdir(ray_tmpdir) == []
