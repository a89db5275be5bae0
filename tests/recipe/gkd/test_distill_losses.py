"""Distillation divergences against hand-worked values on small distributions."""

from __future__ import annotations

import math

import pytest
import torch

from recipe.gkd.distill_losses import (
    DISTILL_LOSS_REGISTRY,
    forward_kl,
    generalized_jsd,
    renormalize,
    reverse_kl,
    token_distill_loss,
)
from recipe.gkd.make_student import kept_layers

P = [0.5, 0.25, 0.25]  # teacher
Q = [0.25, 0.5, 0.25]  # student


def _log(probs):
    return torch.log(torch.tensor([probs], dtype=torch.float64))


def _kl(a, b):
    return sum(x * math.log(x / y) for x, y in zip(a, b) if x > 0)


def test_forward_and_reverse_kl_match_the_definitions():
    assert forward_kl(_log(P), _log(Q)).item() == pytest.approx(_kl(P, Q))
    assert reverse_kl(_log(P), _log(Q)).item() == pytest.approx(_kl(Q, P))
    # both are 0.25 * log 2 here: 0.5 log 2 - 0.25 log 2 (and symmetric)
    assert forward_kl(_log(P), _log(Q)).item() == pytest.approx(0.25 * math.log(2))


def test_generalized_jsd_matches_gkd_definition():
    beta = 0.3
    mixture = [beta * p + (1 - beta) * q for p, q in zip(P, Q)]
    expected = beta * _kl(P, mixture) + (1 - beta) * _kl(Q, mixture)
    assert generalized_jsd(_log(P), _log(Q), beta).item() == pytest.approx(expected)


def test_generalized_jsd_limits_are_the_kls():
    assert generalized_jsd(_log(P), _log(Q), 0.0).item() == pytest.approx(_kl(P, Q))
    assert generalized_jsd(_log(P), _log(Q), 1.0).item() == pytest.approx(_kl(Q, P))


def test_identical_distributions_have_zero_divergence():
    for name in ("forward_kl", "reverse_kl", "jsd"):
        assert DISTILL_LOSS_REGISTRY.get(name)(_log(P), _log(P), 0.5).item() == pytest.approx(0.0, abs=1e-12)


def test_zero_probability_tokens_contribute_nothing():
    teacher = torch.log(torch.tensor([[1.0, 0.0]], dtype=torch.float64))
    student = torch.log(torch.tensor([[0.5, 0.5]], dtype=torch.float64))
    assert forward_kl(teacher, student).item() == pytest.approx(math.log(2))


def test_top_k_support_is_renormalised_and_full_vocab_is_exact():
    torch.manual_seed(0)
    teacher_logits, student_logits = torch.randn(2, 3, 7, dtype=torch.float64)
    teacher = torch.log_softmax(teacher_logits, -1)
    student = torch.log_softmax(student_logits, -1)
    # k = vocabulary: the exact reverse KL of the full distributions
    full = token_distill_loss("reverse_kl", teacher, student)
    exact = (student.exp() * (student - teacher)).sum(-1)
    assert torch.allclose(full, exact.float(), atol=1e-6)
    # k = 2: both renormalised over the teacher's two best tokens
    values, indices = torch.topk(teacher, 2, dim=-1)
    truncated = token_distill_loss("forward_kl", values, student.gather(-1, indices))
    p, q = renormalize(values), renormalize(student.gather(-1, indices))
    assert torch.allclose(truncated, (p.exp() * (p - q)).sum(-1).float(), atol=1e-6)


def test_loss_gradient_moves_the_student_towards_the_teacher():
    teacher = _log(P).float()
    logits = torch.zeros(1, 3, requires_grad=True)
    optimizer = torch.optim.SGD([logits], lr=1.0)
    losses = []
    for _ in range(20):
        loss = token_distill_loss("reverse_kl", teacher, torch.log_softmax(logits, -1)).sum()
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert losses[-1] < 0.05 * losses[0]


def test_unknown_loss_type_lists_registered_names():
    with pytest.raises(ValueError, match="reverse_kl"):
        token_distill_loss("tvd", _log(P), _log(Q))


def test_kept_layers_are_evenly_spaced_with_both_ends():
    assert kept_layers(30, 8) == [0, 4, 8, 12, 17, 21, 25, 29]
    assert kept_layers(2, 1) == [0]
    assert kept_layers(4, 4) == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        kept_layers(4, 5)
