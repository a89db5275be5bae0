"""The Megatron TP-gradient probe's head-padding checks, on hand-made tensors."""

from __future__ import annotations

import torch

from benchmarks.gpu.megatron_tp_grads import _padding_max, _zero_head_grads


def test_padding_max_reads_only_the_cut_rows_and_columns():
    weight = torch.zeros(4, 3)
    weight[:3, :2] = 9.0  # the original (3, 2) block: not padding
    weight[3, 0], weight[1, 2] = -0.25, 0.125  # a padded row and a padded column
    assert _padding_max({"w": weight, "n": torch.ones(2)}, {"w": (3, 2), "n": (2,)}) == 0.25
    assert _padding_max({"n": torch.ones(2)}, {"n": (2,)}) == 0.0


def test_zero_head_grads_looks_at_the_zero_key_value_head_and_its_query_group():
    tokens, dim = 5, 4
    q, k, v = torch.randn(tokens, 4, dim), torch.randn(tokens, 2, dim), torch.randn(tokens, 2, dim)
    k[:, 1], v[:, 1], q[:, 2:] = 0, 0, 0  # key/value head 1 and its query heads 2, 3 are padding
    kernel_in = [t.clone().requires_grad_() for t in (q, k, v)]
    for t in kernel_in:
        t.grad = torch.zeros_like(t)
    kernel_in[0].grad[:, 1] = 5.0  # a real head's gradient: not counted
    kernel_in[0].grad[3, 3] = 0.5  # query head 3 belongs to the zero group
    record = {"q": q, "k": k, "v": v, "engine_dk": torch.zeros_like(k), "engine_dv": torch.zeros_like(v)}
    record["engine_dv"][0, 1, 2] = -0.75
    record["engine_dv"][0, 0] = 7.0  # real head
    got = _zero_head_grads(record, kernel_in)
    assert got == {"zero_kv_heads": [1], "zero_head_kernel_grad": 0.5, "zero_head_engine_grad": 0.75}
    record["k"] = torch.randn(tokens, 2, dim)
    assert _zero_head_grads(record, kernel_in) == {}
