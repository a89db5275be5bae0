"""AgentLoopManager through Ray, as the trainer builds it: a colocated actor-rollout worker group in
``rollout.mode=async`` and two agent-loop workers.

Same prompts, greedy: the async path (wake_up -> single requests from the agent loops -> sleep) returns exactly the
sync path's rollout batch from the same worker group; sampled rollouts carry the engine's log-probs and the agent
loop metrics; the hybrid contract holds (weights synced on every wake-up, serving stopped afterwards).
"""

from __future__ import annotations

import numpy as np
import pytest
import ray
import torch

from tests.workers.rollout.helpers import PROMPTS, load_tokenizer, peaked_tiny_path
from verl.protocol import DataProto
from verl.trainer.config.loader import load_config

pytestmark = pytest.mark.slow

PROMPT_LENGTH, RESPONSE_LENGTH = 16, 8


@pytest.fixture(scope="module")
def setup():
    from verl.experimental.agent_loop import AgentLoopManager
    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
    from verl.single_controller.ray.colocated import create_colocated_worker_cls
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    config = load_config(
        [
            f"actor_rollout_ref.model.path={peaked_tiny_path()}",
            f"data.max_prompt_length={PROMPT_LENGTH}",
            f"data.max_response_length={RESPONSE_LENGTH}",
            "data.train_batch_size=4",
            "actor_rollout_ref.actor.ppo_mini_batch_size=4",
            "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.mode=async",
            "actor_rollout_ref.rollout.agent.num_workers=2",
            "actor_rollout_ref.rollout.n=2",
            "actor_rollout_ref.rollout.gpu_memory_utilization=0.05",
            "actor_rollout_ref.rollout.max_num_seqs=16",
            "actor_rollout_ref.rollout.calculate_log_probs=True",
            "trainer.n_gpus_per_node=1",
        ],
        config_name="ppo_demo",  # GRPO, fp32 rollout, packed sequences batched by tokens
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    pool = RayResourcePool([1], use_gpu=False, max_colocate_count=1, cpus_per_bundle=1)
    worker = RayClassWithInitArgs(ActorRolloutRefWorker, config=config.actor_rollout_ref, role="actor_rollout")
    fused = create_colocated_worker_cls({"actor_rollout": worker})
    group = RayWorkerGroup(pool, fused, device_name="cpu").spawn(prefix_set=["actor_rollout"])["actor_rollout"]
    group.init_model()
    manager = AgentLoopManager(config, worker_group=group)
    yield group, manager, load_tokenizer(peaked_tiny_path())
    ray.shutdown()


def prompt_batch(tokenizer, meta_info: dict) -> DataProto:
    """Left-padded prompts with the dataset's ``raw_prompt_ids`` (what single_turn_agent generates from)."""
    ids = [tokenizer(text).input_ids for text in PROMPTS]
    input_ids = torch.full((len(ids), PROMPT_LENGTH), tokenizer.pad_token_id)
    mask = torch.zeros((len(ids), PROMPT_LENGTH), dtype=torch.long)
    for row, seq in enumerate(ids):
        input_ids[row, PROMPT_LENGTH - len(seq) :] = torch.tensor(seq)
        mask[row, PROMPT_LENGTH - len(seq) :] = 1
    raw = np.empty(len(ids), dtype=object)
    raw[:] = ids
    meta = {"eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id, **meta_info}
    return DataProto.from_dict(
        tensors={"input_ids": input_ids, "attention_mask": mask, "position_ids": (mask.cumsum(-1) - 1).clamp(min=0)},
        non_tensors={"raw_prompt_ids": raw, "uid": np.array([f"u{i}" for i in range(len(ids))], dtype=object)},
        meta_info=meta,
    )


def test_async_greedy_equals_sync_greedy(setup):
    group, manager, tokenizer = setup
    meta = {"do_sample": False, "validate": False, "n": 1}
    sync = group.generate_sequences(prompt_batch(tokenizer, meta))
    async_output = manager.generate_sequences(prompt_batch(tokenizer, meta))
    for key in ("prompts", "responses", "response_mask", "input_ids", "attention_mask", "position_ids"):
        assert torch.equal(async_output.batch[key], sync.batch[key]), key
    # the same engine scored the same tokens: log-probs equal up to batch-composition float32 effects
    assert torch.allclose(async_output.batch["rollout_log_probs"], sync.batch["rollout_log_probs"], atol=1e-4)
    assert async_output.non_tensor_batch["uid"].tolist() == [f"u{i}" for i in range(len(PROMPTS))]
    metrics = async_output.meta_info["metrics"]
    assert metrics["num_turns/mean"] == 2.0 and "timing_s/update_weights" in metrics
    assert async_output.meta_info["timing"]["generate_sequences"] > 0


def test_sampled_rollouts_carry_engine_log_probs_and_serving_stops(setup):
    group, manager, tokenizer = setup
    output = manager.generate_sequences(prompt_batch(tokenizer, {"do_sample": True, "temperature": 1.0, "n": 1}))
    mask = output.batch["response_mask"].bool()
    log_probs = output.batch["rollout_log_probs"]
    assert mask.any() and (log_probs[mask] < 0).all() and (log_probs[~mask] == 0).all()
    handle = manager.server_handles[0]
    with pytest.raises(ray.exceptions.RayTaskError, match="not serving"):  # asleep between rollouts
        ray.get(getattr(handle.actor, handle.method_name).remote([1, 2], {"temperature": 0.0}, "late"))
