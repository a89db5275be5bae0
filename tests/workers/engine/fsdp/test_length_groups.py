"""The ``padded_grouped`` packed-attention kernel: its cut points, its arithmetic, its plan's way through a model."""

import itertools
import random

import pytest
import torch

from tests.workers.engine.fsdp.test_attention import _per_sequence_attention
from verl.workers.engine.fsdp.length_groups import group_bounds, grouped_padded_sdpa, plan_length_groups


def _cost(lengths: list[int], bounds: list[int]) -> int:
    return sum((stop - first) * lengths[stop - 1] ** 2 for first, stop in zip(bounds[:-1], bounds[1:]))


def _cheapest_by_enumeration(lengths: list[int], groups: int) -> int:
    """Every way to cut the sorted lengths into ``groups`` runs of at least two."""
    count, best = len(lengths), None
    for cuts in itertools.combinations(range(2, count - 1), groups - 1):
        bounds = [0, *cuts, count]
        if all(stop - first >= 2 for first, stop in zip(bounds[:-1], bounds[1:])):
            cost = _cost(lengths, bounds)
            best = cost if best is None else min(best, cost)
    return best


def test_cut_points_are_the_cheapest_of_all_cuts():
    rng = random.Random(0)
    for _ in range(200):
        lengths = sorted(rng.randint(1, 300) for _ in range(rng.randint(1, 13)))
        bounds = group_bounds(lengths)
        groups = max(1, min(4, len(lengths) // 2))
        assert len(bounds) == groups + 1 and bounds[0] == 0 and bounds[-1] == len(lengths)
        if groups == 1:
            continue
        assert min(stop - first for first, stop in zip(bounds[:-1], bounds[1:])) >= 2, (lengths, bounds)
        assert _cost(lengths, bounds) == _cheapest_by_enumeration(lengths, groups), (lengths, bounds)


def test_hand_worked_cut():
    """Four short and two long sequences: two groups [2, 2, 3, 3] and [40, 40] cost 4*9 + 2*1600 = 3236, against
    6*1600 = 9600 padded to 40 at once (the ``padded`` kernel's cost); a third group (limit 3) splits the short
    ones [2, 2] | [3, 3] for 8 + 18 + 3200 = 3226."""
    assert group_bounds([2, 2, 3, 3, 40, 40], max_groups=2) == [0, 4, 6]
    assert group_bounds([2, 2, 3, 3, 40, 40], max_groups=3) == [0, 2, 4, 6]


def test_plan_places_every_token_once_and_groups_by_length():
    lengths = [5, 0, 30, 2, 31, 6, 3, 29]  # pack order; the empty sequence has no token
    plan = plan_length_groups(lengths, torch.device("cpu"))
    starts = [sum(lengths[:i]) for i in range(len(lengths))]
    tokens = torch.cat(plan.tokens)
    assert sorted(tokens.tolist()) == list(range(sum(lengths)))
    assert torch.equal(tokens[plan.inverse], torch.arange(sum(lengths)))
    by_group = []
    for (num_seqs, max_len), group_tokens, seq, pos in zip(plan.sizes, plan.tokens, plan.seqs, plan.positions):
        members = {}
        for token, s, p in zip(group_tokens.tolist(), seq.tolist(), pos.tolist()):
            owner = max(i for i, start in enumerate(starts) if start <= token and lengths[i])
            assert token - starts[owner] == p
            members.setdefault(s, owner)
        assert len(members) == num_seqs and max(lengths[i] for i in members.values()) == max_len
        by_group.append(sorted(lengths[i] for i in members.values()))
    assert by_group == [[2, 3], [5, 6], [29, 30, 31]]  # 7 sequences: 3 groups of at least two


@pytest.mark.parametrize(
    "lens, heads", [([5, 1, 9, 2, 12, 3, 8, 7], (4, 2)), ([3, 0, 4, 11, 1, 6], (6, 2)), ([4, 6], (3, 3))]
)
def test_grouped_kernel_output_and_gradients_match_plain_attention_per_sequence(lens, heads):
    """float64 on CPU: output and dq/dk/dv equal plain per-sequence attention (padding rows contribute nothing)."""
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(sum(lens), h, 8, generator=gen, dtype=torch.float64, requires_grad=True) for h in
               (heads[0], heads[1], heads[1]))  # fmt: skip
    grad_out = torch.randn(sum(lens), heads[0], 8, generator=gen, dtype=torch.float64)
    out = grouped_padded_sdpa(q, k, v, plan_length_groups(lens, q.device), 0.3)
    grads = torch.autograd.grad(out, (q, k, v), grad_out)
    kept = [n for n in lens if n]  # the reference skips nothing but has no row for an empty sequence either
    ref = _per_sequence_attention(q, k, v, kept, 0.3)
    ref_grads = torch.autograd.grad(ref, (q, k, v), grad_out)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    for name, got, want in zip("qkv", grads, ref_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10, msg=f"d{name}")


def test_plan_reaches_every_layer_through_the_model(monkeypatch):
    """A packed forward of a tiny Llama with the plan in its kwargs (``padded_grouped`` made to apply on CPU):
    logits equal the per-sequence kernel's, and the grouped kernel ran once per layer."""
    from tests.workers.engine.fsdp.distributed import rollout_batch
    from tests.workers.engine.fsdp.test_attention import _model
    from verl.workers.engine.fsdp import attention, packing
    from verl.workers.engine.fsdp.length_groups import LENGTH_GROUPS_KWARG
    from verl.workers.engine.fsdp.packing import PACKING_KWARGS, pack

    batch = rollout_batch(batch_size=6, seed=4)
    packed = pack(batch["input_ids"], batch["attention_mask"], batch["position_ids"])
    model = _model("llama", "verl_varlen")
    with torch.no_grad():
        plain = model(input_ids=packed.input_ids, position_ids=packed.position_ids, **packed.attention_kwargs())
        assert LENGTH_GROUPS_KWARG in PACKING_KWARGS  # kept out of a vision tower like the boundaries
        assert LENGTH_GROUPS_KWARG not in packed.attention_kwargs()  # CPU: no plan, no cost
        monkeypatch.setenv("VERL_PACKED_ATTENTION", "padded_grouped")
        for module in (attention, packing):
            monkeypatch.setattr(module, "uses_length_groups", lambda device: True)
        calls = []
        monkeypatch.setattr(attention, "grouped_padded_sdpa", lambda *a: calls.append(1) or grouped_padded_sdpa(*a))
        kwargs = packed.attention_kwargs()
        assert [n for n, _ in kwargs[LENGTH_GROUPS_KWARG].sizes] == [2, 2, 2]
        grouped = model(input_ids=packed.input_ids, position_ids=packed.position_ids, **kwargs)
    assert len(calls) == model.config.num_hidden_layers
    torch.testing.assert_close(grouped.logits, plain.logits, atol=1e-5, rtol=0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_grouped_kernel_on_cuda_matches_float32_per_sequence():
    """bf16 on the GPU (flash sdpa per group) against float32 per-sequence attention: a GRPO-like pack of 40
    sequences of 16-700 tokens, 14/2 heads (Qwen2.5-0.5B)."""
    rng = random.Random(1)
    lens = [rng.randint(16, 700) for _ in range(40)]
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(sum(lens), h, 64, device="cuda", generator=gen).bfloat16().requires_grad_()
               for h in (14, 2, 2))  # fmt: skip
    grad_out = torch.randn(sum(lens), 14, 64, device="cuda", generator=gen).bfloat16()
    out = grouped_padded_sdpa(q, k, v, plan_length_groups(lens, q.device), 0.125)
    out.backward(grad_out)
    ref_in = [t.detach().float().requires_grad_() for t in (q, k, v)]
    ref = _per_sequence_attention(*ref_in, lens, 0.125)
    ref.backward(grad_out.float())
    assert float((out.float() - ref).norm() / ref.norm()) < 1e-2
    for name, got, want in zip("qkv", (q, k, v), ref_in, strict=True):
        error = float((got.grad.float() - want.grad).norm() / want.grad.norm())
        assert error < 2e-2, f"d{name}: relative error {error:.4f}"
