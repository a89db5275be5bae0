"""``hf`` rollout: the sampler against hand-worked distributions, greedy generation against transformers'
``generate``, EOS and length-limit masks, log-probs against a teacher-forced forward, and FSDP2 (1 and 2 ranks)."""

from __future__ import annotations

import math
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

from tests.support.models import tiny_model_path
from tests.workers.rollout.helpers import (
    PROMPTS,
    hf_greedy_reference,
    load_model,
    load_tokenizer,
    make_prompts,
    model_config,
    recompute_log_probs,
    rollout_config,
    train_toward,
)
from verl.workers.rollout import build_rollout
from verl.workers.rollout.hf_rollout import HFRollout, sample_next_token
from verl.workers.rollout.sampling import SamplingSettings

TARGET = " one two three four five six seven eight nine ten"


def _settings(**kw) -> SamplingSettings:
    values = dict(n=1, temperature=1.0, top_p=1.0, top_k=-1, response_length=4, eos_token_ids=(2,), pad_token_id=2)
    values.update(kw)
    return SamplingSettings(**values)


def test_greedy_picks_argmax_with_raw_log_prob():
    logits = torch.tensor([[1.0, 3.0, 2.0]])
    tokens, log_probs = sample_next_token(logits, _settings(temperature=0.0))
    expected = 3.0 - math.log(math.exp(1) + math.exp(3) + math.exp(2))
    assert tokens.tolist() == [1] and log_probs.item() == pytest.approx(expected, abs=1e-6)


def test_top_k_keeps_k_largest_and_renormalises():
    torch.manual_seed(0)
    logits = torch.tensor([[1.0, 2.0, 3.0, 4.0]]).repeat(4000, 1)
    tokens, log_probs = sample_next_token(logits, _settings(top_k=2, temperature=2.0))
    assert set(tokens.tolist()) == {2, 3}
    # kept z = [1.5, 2.0]: p(3) = 1 / (1 + e^-0.5)
    p3 = 1.0 / (1.0 + math.exp(-0.5))
    assert (tokens == 3).float().mean().item() == pytest.approx(p3, abs=0.03)
    assert log_probs[tokens == 3][0].item() == pytest.approx(math.log(p3), abs=1e-5)
    assert log_probs[tokens == 2][0].item() == pytest.approx(math.log(1 - p3), abs=1e-5)


def test_top_p_keeps_the_smallest_prefix_reaching_p():
    torch.manual_seed(0)
    probs = torch.tensor([0.05, 0.5, 0.15, 0.3])
    logits = probs.log()[None].repeat(4000, 1)
    tokens, log_probs = sample_next_token(logits, _settings(top_p=0.7))
    # sorted: 0.5, 0.3 (mass before 0.5 < 0.7), 0.15 (mass before 0.8 >= 0.7: dropped) -> 0.625 / 0.375
    assert set(tokens.tolist()) == {1, 3}
    assert (tokens == 1).float().mean().item() == pytest.approx(0.625, abs=0.03)
    assert log_probs[tokens == 3][0].item() == pytest.approx(math.log(0.375), abs=1e-5)


@pytest.fixture(scope="module")
def trained():
    """Tiny Llama trained for a few steps so greedy continuations are distinct tokens, not ties."""
    path = tiny_model_path("llama")
    tokenizer = load_tokenizer(path)
    model = load_model(path)
    train_toward(model, tokenizer, PROMPTS, TARGET, steps=25)
    return path, model, tokenizer


def test_greedy_matches_transformers_generate(trained):
    path, model, tokenizer = trained
    rollout, manager = build_rollout(rollout_config("hf", response_length=6), model_config(path), tokenizer, model)
    model.train()
    with manager:
        assert not model.training
        output = rollout.generate_sequences(make_prompts(tokenizer, meta_info={"do_sample": False}))
    assert model.training  # the manager restores the mode it found
    expected = hf_greedy_reference(model.eval(), tokenizer, PROMPTS, max_new_tokens=6)
    assert output.batch["responses"].tolist() == expected
    assert manager.metrics["timing_s/update_weights"] == 0.0
    assert {"perf/rollout_memory_gb", "perf/training_memory_gb"} <= set(manager.metrics)


def test_static_cache_gives_the_same_tokens(trained):
    path, model, tokenizer = trained
    config = rollout_config("hf", engine_kwargs={"hf": {"cache_implementation": "static", "micro_batch_size": 3}})
    rollout = HFRollout(config, model_config(path), tokenizer, actor_module=model.eval())
    output = rollout.generate_sequences(make_prompts(tokenizer, meta_info={"do_sample": False}))
    assert output.batch["responses"].tolist() == hf_greedy_reference(model, tokenizer, PROMPTS, max_new_tokens=8)


def test_early_eos_and_length_limit_masks(trained):
    path, model, tokenizer = trained
    reference = hf_greedy_reference(model.eval(), tokenizer, PROMPTS, max_new_tokens=8)
    stop_token = reference[0][2]  # row 0 stops at its third token
    assert stop_token not in reference[0][:2]
    rollout = HFRollout(rollout_config("hf"), model_config(path), tokenizer, actor_module=model)
    meta_info = {"do_sample": False, "eos_token_id": stop_token, "pad_token_id": 0}
    output = rollout.generate_sequences(make_prompts(tokenizer, meta_info=meta_info))
    responses, response_mask = output.batch["responses"], output.batch["response_mask"]
    for row, tokens in enumerate(reference):
        stop = tokens.index(stop_token) + 1 if stop_token in tokens else len(tokens)
        assert responses[row].tolist() == tokens[:stop] + [0] * (8 - stop)
        assert response_mask[row].tolist() == [1] * stop + [0] * (8 - stop)
    assert response_mask[0].tolist() == [1, 1, 1, 0, 0, 0, 0, 0]  # EOS itself counted
    assert torch.equal(output.batch["attention_mask"][:, -8:], response_mask)
    assert (output.batch["rollout_log_probs"][response_mask == 0] == 0).all()
    # a response_length of 2 ends row 0 before its stop token: a length-limit hit keeps every token
    meta_info["response_length"] = 2
    short = rollout.generate_sequences(make_prompts(tokenizer, meta_info=meta_info))
    assert short.batch["responses"][0].tolist() == reference[0][:2]
    assert short.batch["response_mask"][0].tolist() == [1, 1]


def test_sampled_log_probs_match_teacher_forced_forward(trained):
    path, model, tokenizer = trained
    torch.manual_seed(1)
    config = rollout_config("hf", n=3, temperature=0.8)
    rollout = HFRollout(config, model_config(path), tokenizer, actor_module=model.eval())
    output = rollout.generate_sequences(make_prompts(tokenizer))
    assert len(output) == 3 * len(PROMPTS)
    assert output.non_tensor_batch["uid"].tolist() == [f"uid-{i}" for i in range(len(PROMPTS)) for _ in range(3)]
    reference = recompute_log_probs(model, output, temperature=0.8)
    mask = output.batch["response_mask"].bool()
    diff = (output.batch["rollout_log_probs"].double() - reference)[mask].abs()
    assert diff.max().item() < 1e-4, f"mean {diff.mean().item():.2e} max {diff.max().item():.2e}"


def test_one_rank_fsdp2_module_generates_like_the_plain_module(trained):
    from torch.distributed.fsdp import fully_shard

    path, model, tokenizer = trained
    expected = hf_greedy_reference(model.eval(), tokenizer, PROMPTS, max_new_tokens=8)
    if torch.distributed.is_initialized():
        pytest.skip("needs its own 1-rank process group")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    try:
        sharded = load_model(path)
        sharded.load_state_dict(model.state_dict())
        for layer in sharded.model.layers:
            fully_shard(layer)
        fully_shard(sharded)
        rollout = HFRollout(rollout_config("hf"), model_config(path), tokenizer, actor_module=sharded.eval())
        assert rollout.sync_steps_across_ranks
        output = rollout.generate_sequences(make_prompts(tokenizer, meta_info={"do_sample": False}))
    finally:
        torch.distributed.destroy_process_group()
    assert output.batch["responses"].tolist() == expected


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _fsdp_rank(rank: int, port: int, path: str, state: dict, stop_token: int, results) -> None:
    """One rank of a 2-rank FSDP2 run; rank 0 gets a prompt that stops early, rank 1 ones that do not."""
    from torch.distributed.fsdp import fully_shard

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=2)
    try:
        tokenizer = load_tokenizer(path)
        model = load_model(path)
        model.load_state_dict(state)
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        texts = PROMPTS[:1] if rank == 0 else PROMPTS[1:]
        rollout = HFRollout(rollout_config("hf"), model_config(path), tokenizer, actor_module=model.eval())
        meta_info = {"do_sample": False, "eos_token_id": stop_token}
        output = rollout.generate_sequences(make_prompts(tokenizer, texts, meta_info=meta_info))
        results.put((rank, output.batch["responses"].tolist(), output.batch["response_mask"].tolist()))
    finally:
        torch.distributed.destroy_process_group()


def test_two_rank_fsdp2_generation_with_uneven_stops(trained):
    """FSDP2 all-gathers in every forward: a rank whose rows all stopped must keep stepping with the other."""
    path, model, tokenizer = trained
    reference = hf_greedy_reference(model.eval(), tokenizer, PROMPTS, max_new_tokens=8)
    stop_token = reference[0][1]
    assert stop_token not in reference[0][:1]
    state = {key: value.clone() for key, value in model.state_dict().items()}
    context = mp.get_context("spawn")
    results = context.Queue()
    port = _free_port()
    procs = [context.Process(target=_fsdp_rank, args=(r, port, path, state, stop_token, results)) for r in range(2)]
    for proc in procs:
        proc.start()
    outputs = dict((rank, (responses, mask)) for rank, responses, mask in (results.get(timeout=240) for _ in procs))
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    responses = outputs[0][0] + outputs[1][0]
    masks = outputs[0][1] + outputs[1][1]
    for row, tokens in enumerate(reference):
        stop = tokens.index(stop_token) + 1 if stop_token in tokens else len(tokens)
        assert responses[row][:stop] == tokens[:stop]
        assert masks[row] == [1] * stop + [0] * (8 - stop)
