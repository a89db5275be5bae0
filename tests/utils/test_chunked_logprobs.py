"""Chunked log-probs / entropy (from logits and fused from hidden states) against a float64 ``log_softmax``."""

from __future__ import annotations

import pytest
import torch

from verl.utils.chunked_logprobs import log_probs_from_hidden, log_probs_from_logits

N, H, V = 29, 8, 37


def _inputs(seed: int):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(N, H, generator=gen, dtype=torch.float64)
    weight = torch.randn(V, H, generator=gen, dtype=torch.float64)
    labels = torch.randint(0, V, (N,), generator=gen)
    grad_lp, grad_ent = torch.randn(N, generator=gen, dtype=torch.float64), torch.randn(N, generator=gen).double()
    return hidden, weight, labels, grad_lp, grad_ent


def _reference(hidden, weight, labels, temperature, grad_lp, grad_ent):
    """Full float64 log_softmax: values and the gradients of ``<log_prob, grad_lp> + <entropy, grad_ent>``."""
    hidden, weight = hidden.clone().requires_grad_(True), weight.clone().requires_grad_(True)
    log_softmax = torch.log_softmax(hidden @ weight.t() / temperature, dim=-1)
    log_prob = log_softmax.gather(1, labels[:, None])[:, 0]
    entropy = -(log_softmax.exp() * log_softmax).sum(-1)
    objective = log_prob @ grad_lp + (entropy @ grad_ent if grad_ent is not None else 0.0)
    objective.backward()
    return log_prob.detach(), entropy.detach(), hidden.grad, weight.grad


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("entropy_grad", [True, False], ids=["entropy-grad", "entropy-metric-only"])
@pytest.mark.parametrize("chunk_rows", [1, 4, 100])
def test_fused_and_logits_paths_match_full_log_softmax(temperature, entropy_grad, chunk_rows):
    hidden, weight, labels, grad_lp, grad_ent = _inputs(seed=chunk_rows)
    grad_ent = grad_ent if entropy_grad else None
    ref_lp, ref_ent, ref_dh, ref_dw = _reference(hidden, weight, labels, temperature, grad_lp, grad_ent)

    h, w = hidden.clone().requires_grad_(True), weight.clone().requires_grad_(True)
    lp, ent = log_probs_from_hidden(h, w, labels, temperature, calculate_entropy=True, chunk_rows=chunk_rows)
    (lp @ grad_lp + (ent @ grad_ent if entropy_grad else 0.0)).backward()
    for actual, expected in ((lp, ref_lp), (ent, ref_ent), (h.grad, ref_dh), (w.grad, ref_dw)):
        torch.testing.assert_close(actual, expected, rtol=1e-10, atol=1e-10)

    h2, w2 = hidden.clone().requires_grad_(True), weight.clone().requires_grad_(True)
    logits = h2 @ w2.t()  # a non-leaf, as a model's output: its storage receives the gradient
    lp2, ent2 = log_probs_from_logits(logits, labels, temperature, calculate_entropy=True, chunk_rows=chunk_rows)
    (lp2 @ grad_lp + (ent2 @ grad_ent if entropy_grad else 0.0)).backward()
    for actual, expected in ((lp2, ref_lp), (ent2, ref_ent), (h2.grad, ref_dh), (w2.grad, ref_dw)):
        torch.testing.assert_close(actual, expected, rtol=1e-10, atol=1e-10)


def test_low_precision_inputs_reduce_in_float32_and_skip_entropy_when_not_asked():
    hidden, weight, labels, grad_lp, _ = _inputs(seed=3)
    h = hidden.bfloat16().requires_grad_(True)
    w = weight.bfloat16().requires_grad_(True)
    lp, ent = log_probs_from_hidden(h, w, labels, 1.0, calculate_entropy=False, chunk_rows=8)
    assert lp.dtype == torch.float32 and ent is None
    (lp @ grad_lp.float()).backward()
    assert h.grad.dtype == torch.bfloat16 and w.grad.dtype == torch.bfloat16
    # the reference on the same bf16-rounded logits, in float64
    ref_lp = torch.log_softmax((h.detach() @ w.detach().t()).double(), -1).gather(1, labels[:, None])[:, 0]
    torch.testing.assert_close(lp.double(), ref_lp, rtol=0, atol=1e-5)


def test_bad_inputs_fail_with_the_shapes():
    hidden, weight, labels, _, _ = _inputs(seed=4)
    with pytest.raises(ValueError, match="temperature"):
        log_probs_from_logits(hidden @ weight.t(), labels, temperature=0.0)
    with pytest.raises(ValueError, match="labels"):
        log_probs_from_logits(hidden @ weight.t(), labels[:-1])
    with pytest.raises(ValueError, match="weight"):
        log_probs_from_hidden(hidden, weight[:, :-1], labels)


@pytest.mark.slow
def test_compiled_chunk_math_matches_eager():
    """``compiled=True`` (``use_torch_compile``) fuses each chunk's math with torch.compile: same values."""
    hidden, weight, labels, grad_lp, grad_ent = _inputs(seed=5)
    results = []
    for compiled in (False, True):
        h, w = hidden.float().requires_grad_(True), weight.float().requires_grad_(True)
        lp, ent = log_probs_from_hidden(h, w, labels, 0.9, True, chunk_rows=7, compiled=compiled)
        (lp @ grad_lp.float() + ent @ grad_ent.float()).backward()
        results.append((lp, ent, h.grad, w.grad))
    for eager, compiled in zip(*results):
        torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("entropy_grad", [True, False], ids=["entropy-grad", "entropy-metric-only"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_backward_into_the_logits_matches_eager(entropy_grad, dtype):
    """The compiled backward of ``log_probs_from_logits`` writes the gradient over a non-leaf ``logits`` in one fused
    pass: the same gradient as the eager chunk path (which goes through a float32 copy and ``scatter_add_``)."""
    hidden, weight, labels, grad_lp, grad_ent = _inputs(seed=6)
    results = []
    for compiled in (False, True):
        h, w = hidden.to(dtype).requires_grad_(True), weight.to(dtype).requires_grad_(True)
        logits = h @ w.t()
        lp, ent = log_probs_from_logits(logits, labels, 0.8, True, chunk_rows=5, compiled=compiled)
        (lp @ grad_lp.float() + (ent @ grad_ent.float() if entropy_grad else 0.0)).backward()
        results.append((lp, ent, h.grad, w.grad))
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    for eager, compiled in zip(*results):
        torch.testing.assert_close(compiled, eager, rtol=tolerance, atol=tolerance)
