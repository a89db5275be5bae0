"""Sequence-parallel forward (``forward_packed`` through ``forward_log_probs``) on 2 gloo ranks against each sequence
run alone in plain Hugging Face code: log-probs, entropy, and the gradient of a loss built from them (the ranks'
gradients summed) — with several packed sequences (block-diagonal mask), one sequence of odd length (padded to
the group size, plain causal attention), a replicated KV head (4 query / 1 KV heads over 2 ranks) and gradient
checkpointing (the attention's all-to-all replayed in the backward pass)."""

from __future__ import annotations

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rollout_batch, run_on_ranks

SP = 2
# Each log-prob / gradient entry is a float32 sum over at most a few hundred terms, in a different order than the
# reference: about n * 2^-24 relative to the largest term (measured below 1e-6).
ATOL = 2e-5
GRAD_RTOL = 2e-5


def single_sequence_batch() -> dict[str, torch.Tensor]:
    """One unpadded sequence of 11 tokens: odd, so the split pads it by one token."""
    ids = torch.randint(3, 1000, (1, 11), generator=torch.Generator().manual_seed(7))
    mask = torch.ones_like(ids)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": torch.arange(11)[None]}


def loss_weights(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Random weights on positions ``t`` whose next token belongs to the same sequence (where a log-prob exists)."""
    mask = batch["attention_mask"]
    pairs = torch.zeros_like(mask, dtype=torch.float32)
    pairs[:, :-1] = (mask[:, :-1] * mask[:, 1:]).float()
    gen = torch.Generator().manual_seed(11)
    return torch.randn(mask.shape, generator=gen) * pairs, torch.randn(mask.shape, generator=gen) * pairs


def _sp_rank(rank, world, cases):
    return {name: _one_case(*case) for name, case in cases.items()}


def _one_case(model_path, batch, gradient_checkpointing):
    from transformers import AutoModelForCausalLM

    from verl.workers.engine.fsdp.forward import forward_log_probs
    from verl.workers.engine.fsdp.ulysses import create_ulysses_mesh
    from verl.workers.engine.fsdp.ulysses_attention import use_ulysses_attention

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32, attn_implementation="sdpa")
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.train()
    mesh = create_ulysses_mesh(SP)
    assert use_ulysses_attention(model) == "ulysses_sdpa"
    log_probs, entropy = forward_log_probs(
        model, batch["input_ids"], batch["attention_mask"], batch["position_ids"], calculate_entropy=True, ulysses=mesh
    )
    lp_weights, ent_weights = loss_weights(batch)
    ((log_probs * lp_weights).sum() + (entropy * ent_weights).sum()).backward()
    grads = {name: param.grad for name, param in model.named_parameters()}
    for grad in grads.values():  # every rank back-propagates its slice: the sum is the loss's gradient
        torch.distributed.all_reduce(grad)
    return {"log_probs": log_probs.detach(), "entropy": entropy.detach(), "grads": grads}


def reference(model_path: str, batch: dict[str, torch.Tensor]):
    """Each sequence alone through the plain model: log-probs, entropy ``(bs, S)`` and the loss's gradients."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32, attn_implementation="sdpa")
    lp_weights, ent_weights = loss_weights(batch)
    log_probs = torch.zeros(batch["input_ids"].shape)
    entropy = torch.zeros(batch["input_ids"].shape)
    loss = 0.0
    for row in range(batch["input_ids"].shape[0]):
        where = batch["attention_mask"][row].bool().nonzero()[:, 0]
        ids = batch["input_ids"][row, where]
        log_softmax = torch.log_softmax(model(input_ids=ids[None]).logits[0, :-1].float(), dim=-1)
        row_lp = log_softmax.gather(-1, ids[1:, None])[:, 0]
        row_ent = -(log_softmax.exp() * log_softmax).sum(-1)
        positions = where[:-1]
        loss = loss + (row_lp * lp_weights[row, positions]).sum() + (row_ent * ent_weights[row, positions]).sum()
        log_probs[row, positions] = row_lp.detach()
        entropy[row, positions] = row_ent.detach()
    loss.backward()
    return log_probs, entropy, {name: param.grad for name, param in model.named_parameters()}


CASES = {  # name: (architecture, KV heads, gradient checkpointing, batch layout)
    "packed-llama": ("llama", 2, False, "packed"),
    "single-odd-llama": ("llama", 2, False, "single"),
    "replicated-kv-qwen2-checkpointing": ("qwen2", 1, True, "packed"),
}


def case_inputs(name: str):
    arch, kv_heads, gradient_checkpointing, layout = CASES[name]
    batch = rollout_batch(batch_size=4, seed=5) if layout == "packed" else single_sequence_batch()
    batch = {k: batch[k] for k in ("input_ids", "attention_mask", "position_ids")}
    return tiny_model_path(arch, num_key_value_heads=kv_heads), batch, gradient_checkpointing


@pytest.fixture(scope="module")
def sp_results():
    """All cases in one pair of processes (one start-up)."""
    return run_on_ranks(_sp_rank, SP, {name: case_inputs(name) for name in CASES})


@pytest.mark.parametrize("case", list(CASES))
def test_sequence_parallel_forward_and_gradients_match_plain_model(sp_results, case):
    path, batch, _ = case_inputs(case)
    results = [rank_results[case] for rank_results in sp_results]
    expected_lp, expected_ent, expected_grads = reference(path, batch)
    _, ent_weights = loss_weights(batch)
    compared = ent_weights != 0
    for result in results:  # every rank of the group holds the whole outputs
        torch.testing.assert_close(result["log_probs"][compared], expected_lp[compared], atol=ATOL, rtol=1e-5)
        torch.testing.assert_close(result["entropy"][compared], expected_ent[compared], atol=ATOL, rtol=1e-5)
    for name, expected in expected_grads.items():
        tolerance = GRAD_RTOL * float(expected.abs().max())
        torch.testing.assert_close(results[0]["grads"][name], expected, atol=tolerance, rtol=0, msg=name)
