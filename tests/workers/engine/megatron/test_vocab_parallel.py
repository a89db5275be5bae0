"""Chunked vocabulary-parallel log-probs / entropy against a full float64 ``log_softmax`` of the whole vocabulary.

One process (the whole vocabulary on one rank) and two gloo ranks each holding half of the columns: values and
the gradient with respect to each rank's logits (through a non-leaf ``hidden @ weight^T``, whose storage the
backward overwrites) must equal the plain computation, for several chunk sizes, temperatures and with or without
a gradient through the entropy.
"""

from __future__ import annotations

import pytest
import torch

from tests.workers.engine.fsdp.distributed import run_on_ranks
from verl.workers.engine.megatron.vocab_parallel import vocab_parallel_log_probs_entropy

N, H, V = 23, 6, 40


def _inputs(seed: int):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(N, H, generator=gen, dtype=torch.float64)
    weight = 3 * torch.randn(V, H, generator=gen, dtype=torch.float64)
    labels = torch.randint(0, V, (N,), generator=gen)
    grad_lp, grad_ent = torch.randn(N, generator=gen, dtype=torch.float64), torch.randn(N, generator=gen).double()
    return hidden, weight, labels, grad_lp, grad_ent


def _reference(hidden, weight, labels, temperature, grad_lp, grad_ent):
    """``(log_prob, entropy, d objective / d weight)`` of the full logits, objective ``<lp, g> + <H, g'>``."""
    weight = weight.clone().requires_grad_(True)
    log_softmax = torch.log_softmax(hidden @ weight.t() / temperature, dim=-1)
    log_prob = log_softmax.gather(1, labels[:, None])[:, 0]
    entropy = -(log_softmax.exp() * log_softmax).sum(-1)
    (log_prob @ grad_lp + (entropy @ grad_ent if grad_ent is not None else 0.0)).backward()
    return log_prob.detach(), entropy.detach(), weight.grad


def _split(hidden, weight, labels, temperature, grad_lp, grad_ent, rank, world, chunk_rows, group):
    """This rank's ``(log_prob, entropy, weight grad of its columns)`` from its ``V / world`` logit columns."""
    local = V // world
    weight = weight[rank * local : (rank + 1) * local].clone().requires_grad_(True)
    logits = hidden @ weight.t()  # a non-leaf, as the model's output: the backward writes into it
    log_prob, entropy = vocab_parallel_log_probs_entropy(
        logits, labels, rank * local, group, True, temperature, chunk_rows
    )
    (log_prob @ grad_lp + (entropy @ grad_ent if grad_ent is not None else 0.0)).backward()
    return log_prob.detach(), entropy.detach(), weight.grad


CASES = [(t, e, c) for t in (1.0, 0.7) for e in (True, False) for c in (1, 5, 100)]


@pytest.mark.parametrize("temperature,entropy_grad,chunk_rows", CASES)
def test_one_rank_matches_full_log_softmax(temperature, entropy_grad, chunk_rows):
    hidden, weight, labels, grad_lp, grad_ent = _inputs(seed=chunk_rows)
    grad_ent = grad_ent if entropy_grad else None
    expected = _reference(hidden, weight, labels, temperature, grad_lp, grad_ent)
    actual = _split(hidden, weight, labels, temperature, grad_lp, grad_ent, 0, 1, chunk_rows, None)
    for got, want in zip(actual, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def _ranks(rank, world):
    import torch.distributed as dist

    out = []
    for seed, (temperature, entropy_grad, chunk_rows) in enumerate(CASES):
        hidden, weight, labels, grad_lp, grad_ent = _inputs(seed)
        grad_ent = grad_ent if entropy_grad else None
        args = (temperature, grad_lp, grad_ent, rank, world, chunk_rows, dist.group.WORLD)
        out.append(_split(hidden, weight, labels, *args))
    return out


def test_vocabulary_split_over_two_ranks_matches_full_log_softmax():
    per_rank = run_on_ranks(_ranks, 2)
    for seed, (temperature, entropy_grad, _chunk_rows) in enumerate(CASES):
        hidden, weight, labels, grad_lp, grad_ent = _inputs(seed)
        log_prob, entropy, weight_grad = _reference(
            hidden, weight, labels, temperature, grad_lp, grad_ent if entropy_grad else None
        )
        for rank, results in enumerate(per_rank):
            got_lp, got_entropy, got_grad = results[seed]
            torch.testing.assert_close(got_lp, log_prob, rtol=1e-10, atol=1e-10)
            torch.testing.assert_close(got_entropy, entropy, rtol=1e-10, atol=1e-10)
            rows = slice(rank * V // 2, (rank + 1) * V // 2)
            torch.testing.assert_close(got_grad, weight_grad[rows], rtol=1e-10, atol=1e-10)


def test_float32_from_bfloat16_logits_and_no_entropy_unless_asked():
    hidden, weight, labels, _, _ = _inputs(seed=3)
    logits = (hidden @ weight.t()).bfloat16()
    log_prob, entropy = vocab_parallel_log_probs_entropy(logits, labels, 0, chunk_rows=4)
    assert log_prob.dtype == torch.float32 and entropy is None
    expected = torch.log_softmax(logits.double(), dim=-1).gather(1, labels[:, None])[:, 0]
    torch.testing.assert_close(log_prob.double(), expected, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="temperature"):
        vocab_parallel_log_probs_entropy(logits, labels, 0, temperature=0.0)
