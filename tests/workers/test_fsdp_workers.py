"""ActorRolloutRefWorker (2 Ray workers, gloo) and CriticWorker through the single controller, one PPO round:
generate (hf rollout) → old log-probs equal the sampler's own log-probs and a plain HF forward → reference
log-probs equal them before the update → update_actor reports verl's metrics and changes the policy →
save_checkpoint writes a complete folder; the critic returns values of the response shape and updates."""

from __future__ import annotations

import pytest
import ray
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import reference_log_probs
from verl.protocol import DataProto

pytestmark = pytest.mark.slow

PROMPT_LEN, RESPONSE_LEN = 6, 5


@pytest.fixture(scope="module")
def ray_cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def groups(ray_cluster):
    """Worker groups a test made, ``(group, pool)``: killed and their CPUs given back after it (the cluster has 2)."""
    made = []
    yield made
    for group, pool in made:
        for worker in group.workers:
            ray.kill(worker)
        pool.remove_placement_groups()


def _prompts(tokenizer) -> DataProto:
    texts = ["1+1=", "The capital of France is", "Hello", "2*3="]
    ids = [tokenizer(t)["input_ids"][-PROMPT_LEN:] for t in texts]
    input_ids = torch.full((len(ids), PROMPT_LEN), tokenizer.pad_token_id)
    mask = torch.zeros((len(ids), PROMPT_LEN), dtype=torch.long)
    for row, seq in enumerate(ids):
        input_ids[row, PROMPT_LEN - len(seq) :] = torch.tensor(seq)
        mask[row, PROMPT_LEN - len(seq) :] = 1
    meta = {"eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id, "do_sample": True}
    meta |= {"temperature": 1.0, "n": 1, "validate": False}
    return DataProto.from_dict(
        tensors={"input_ids": input_ids, "attention_mask": mask, "position_ids": (mask.cumsum(-1) - 1).clamp(min=0)},
        meta_info=meta,
    )


def _actor_rollout_ref_group(groups: list, path: str, micro_batch_size: int, sp: int = 1):
    """2 ``actor_rollout_ref`` workers (hf rollout, KL loss) with sequence-parallel size ``sp`` for actor and ref."""
    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
    from verl.trainer.config.root import ActorRolloutRefConfig
    from verl.workers.config import FSDPActorConfig, HFModelConfig, OptimConfig, RefConfig, RolloutConfig
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    config = ActorRolloutRefConfig(
        model=HFModelConfig(path=path, use_remove_padding=True, enable_gradient_checkpointing=False),
        actor=FSDPActorConfig(
            ppo_mini_batch_size=4,
            ppo_micro_batch_size_per_gpu=micro_batch_size,
            use_kl_loss=True,
            optim=OptimConfig(lr=1e-2),
            ulysses_sequence_parallel_size=sp,
        ),
        rollout=RolloutConfig(
            name="hf", n=1, prompt_length=PROMPT_LEN, response_length=RESPONSE_LEN, log_prob_micro_batch_size_per_gpu=2
        ),
        ref=RefConfig(log_prob_micro_batch_size_per_gpu=2, ulysses_sequence_parallel_size=sp),
    )
    pool = RayResourcePool([2], use_gpu=False, max_colocate_count=1, cpus_per_bundle=0.5)
    group = RayWorkerGroup(pool, RayClassWithInitArgs(ActorRolloutRefWorker, config=config, role="actor_rollout_ref"))
    groups.append((group, pool))
    group.init_model()
    return group


def _critic_group(groups: list, path: str, workers: int, sp: int = 1):
    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
    from verl.workers.config import CriticConfig, CriticModelConfig, OptimConfig
    from verl.workers.fsdp_workers import CriticWorker

    config = CriticConfig(
        model=CriticModelConfig(path=path, use_remove_padding=True, enable_gradient_checkpointing=False),
        optim=OptimConfig(lr=1e-3),
        ppo_mini_batch_size=4,
        ppo_micro_batch_size_per_gpu=2,
        forward_micro_batch_size_per_gpu=2,
        ulysses_sequence_parallel_size=sp,
    )
    pool = RayResourcePool([workers], use_gpu=False, max_colocate_count=1, cpus_per_bundle=0.5)
    group = RayWorkerGroup(pool, RayClassWithInitArgs(CriticWorker, config=config))
    groups.append((group, pool))
    group.init_model()
    return group


def test_one_ppo_round_through_the_workers(groups, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_model_path("qwen2")
    tokenizer = AutoTokenizer.from_pretrained(path)
    actor_wg = _actor_rollout_ref_group(groups, path, micro_batch_size=1)

    batch = actor_wg.generate_sequences(_prompts(tokenizer))
    assert batch.batch["responses"].shape == (4, RESPONSE_LEN)
    mask = batch.batch["response_mask"].bool()
    timing = batch.meta_info["timing"]  # the rollout's own call is part of the whole, sync and sleep around it
    assert 0 < timing["rollout_call"] <= timing["generate_sequences"]

    batch = batch.union(actor_wg.compute_log_prob(batch))
    old = batch.batch["old_log_probs"]
    torch.testing.assert_close(old[mask], batch.batch["rollout_log_probs"][mask], atol=1e-4, rtol=1e-4)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        expected = reference_log_probs(model, {k: batch.batch[k] for k in batch.batch.keys()})
    torch.testing.assert_close(old[mask], expected[mask], atol=1e-4, rtol=1e-4)
    assert batch.batch["entropys"].shape == old.shape

    batch = batch.union(actor_wg.compute_ref_log_prob(batch))
    torch.testing.assert_close(batch.batch["ref_log_prob"][mask], old[mask], atol=1e-5, rtol=1e-5)

    batch.batch["advantages"] = torch.randn(old.shape) * mask
    metrics = actor_wg.update_actor(batch).meta_info["metrics"]
    for key in ("actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/kl_loss", "actor/grad_norm", "actor/lr"):
        assert key in metrics, key
    assert "perf/mfu/actor" in metrics and "perf/max_memory_allocated_gb" in metrics
    new = actor_wg.compute_log_prob(batch).batch["old_log_probs"]
    assert (new[mask] - old[mask]).abs().max() > 1e-3  # the policy moved

    actor_wg.save_checkpoint(local_path=str(tmp_path / "global_step_1" / "actor"), global_step=1)
    assert (tmp_path / "global_step_1" / "actor" / "model_optim").is_dir()

    critic_wg = _critic_group(groups, path, workers=1)
    values = critic_wg.compute_values(batch).batch["values"]
    assert values.shape == old.shape and torch.all(values[~mask] == 0)
    batch.batch["values"] = values
    batch.batch["returns"] = torch.randn(old.shape) * mask
    critic_metrics = critic_wg.update_critic(batch).meta_info["metrics"]
    for key in ("critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean", "critic/grad_norm", "critic/lr"):
        assert key in critic_metrics, key


def test_sequence_parallel_roles_dispatch_one_copy_per_group(groups):
    """2 workers with ``ulysses_sequence_parallel_size=2`` (one data-parallel group): both get every row, the
    driver gets each row once, and the log-probs / values equal plain single-process forwards."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_model_path("qwen2")
    tokenizer = AutoTokenizer.from_pretrained(path)
    actor_wg = _actor_rollout_ref_group(groups, path, micro_batch_size=2, sp=2)

    batch = actor_wg.generate_sequences(_prompts(tokenizer))  # the rollout splits over both workers
    assert batch.batch["responses"].shape == (4, RESPONSE_LEN)
    mask = batch.batch["response_mask"].bool()
    batch = batch.union(actor_wg.compute_log_prob(batch))
    old = batch.batch["old_log_probs"]
    assert old.shape == (4, RESPONSE_LEN)  # one copy per data-parallel group, not one per rank
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        expected = reference_log_probs(model, {k: batch.batch[k] for k in batch.batch.keys()})
    torch.testing.assert_close(old[mask], expected[mask], atol=1e-4, rtol=1e-4)
    batch = batch.union(actor_wg.compute_ref_log_prob(batch))
    torch.testing.assert_close(batch.batch["ref_log_prob"][mask], old[mask], atol=1e-5, rtol=1e-5)

    batch.batch["advantages"] = torch.randn(old.shape) * mask
    metrics = actor_wg.update_actor(batch).meta_info["metrics"]
    assert metrics["actor/grad_norm"][0] > 0
    new = actor_wg.compute_log_prob(batch).batch["old_log_probs"]
    assert (new[mask] - old[mask]).abs().max() > 1e-3  # the policy moved

    critic_wg = _critic_group(groups, path, workers=2, sp=2)
    values = critic_wg.compute_values(batch).batch["values"]
    assert values.shape == old.shape and torch.all(values[~mask] == 0)
    batch.batch["values"] = values
    batch.batch["returns"] = torch.randn(old.shape) * mask
    assert critic_wg.update_critic(batch).meta_info["metrics"]["critic/grad_norm"][0] > 0


def test_load_tokenizer_applies_the_custom_chat_template():
    from tests.support.models import smollm2_path
    from verl.workers.config import HFModelConfig
    from verl.workers.fsdp_workers import load_tokenizer

    template = "{% for m in messages %}<<{{ m['content'] }}>>{% endfor %}{% if add_generation_prompt %}A:{% endif %}"
    tokenizer = load_tokenizer(HFModelConfig(path=smollm2_path(), custom_chat_template=template))
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    assert text == "<<hi>>A:"
    assert load_tokenizer(HFModelConfig(path=smollm2_path())).chat_template != template


def test_actor_worker_group_uses_nccl_timeout(monkeypatch):
    """actor_rollout_ref.nccl_timeout bounds the worker group's collectives (gloo here, NCCL on GPU)."""
    import torch.distributed as dist

    from verl.trainer.config.loader import load_config
    from verl.utils.distributed import free_port
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    config = load_config(["actor_rollout_ref.nccl_timeout=1234"]).actor_rollout_ref
    for name, value in {
        "RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }.items():
        monkeypatch.setenv(name, value)
    ActorRolloutRefWorker(config, role="actor")
    try:
        backend = dist.group.WORLD._get_backend(torch.device("cpu"))
        assert backend.options._timeout.total_seconds() == 1234
    finally:
        dist.destroy_process_group()
