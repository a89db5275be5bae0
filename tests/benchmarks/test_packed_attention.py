"""The packed-attention benchmark's tail padding and sentinel guard, on CPU against plain per-sequence attention."""

from __future__ import annotations

import torch

from benchmarks.gpu.packed_attention import SENTINEL, guard_check, sentinels, tail_padded
from tests.workers.engine.fsdp.test_attention import _per_sequence_attention
from verl.workers.engine.fsdp.attention import CUDA_KERNELS


def test_tail_padded_kernel_gives_the_unpadded_output_and_gradients():
    """A 13-token pack extended to 32 by a 19-token dummy sequence: output and dq/dk/dv are plain attention's."""
    lens, gen = [5, 1, 7], torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(13, h, 8, generator=gen, dtype=torch.float64, requires_grad=True) for h in (4, 2, 2))
    grad_out = torch.randn(13, 4, 8, generator=gen, dtype=torch.float64)
    cu = torch.tensor([0, 5, 6, 13], dtype=torch.int32)
    out = tail_padded(CUDA_KERNELS["padded"], multiple=16)(q, k, v, cu, 7, 0.3)
    out.backward(grad_out)
    ref_in = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    ref = _per_sequence_attention(*ref_in, lens, 0.3)
    ref.backward(grad_out)
    assert out.shape == (13, 4, 8)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    for got, want in zip((q, k, v), ref_in, strict=True):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-10, atol=1e-10)


def test_sentinels_leave_holes_and_a_well_behaved_kernel_changes_none():
    guards = sentinels(seed=0, count=200, device="cpu")
    assert 60 < len(guards) < 140  # about half kept
    assert all(bool((t == SENTINEL).all()) for t in guards)
    row = guard_check("per_sequence_tail", (4, 2), [5, 1, 7], rounds=2, device="cpu")
    assert row["changed_after_calls"] == {1: 0, 2: 0}
    assert row["tokens"] == 13
