"""Tensor utilities against plain float64 numpy references on random inputs (fp32, bf16, fp64)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import verl.utils.torch_functional as tf
from verl.utils.attention_utils import pad_input, unpad_input

FAST = settings(max_examples=20, deadline=None)
# Tolerances against float64: the result is float32 in every case; bf16 inputs are compared after rounding
# the reference's input to bf16 too, so only the float32 reduction error remains.
ATOL = {torch.float64: 1e-12, torch.float32: 2e-5, torch.bfloat16: 2e-5}


def np_log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def random_logits(shape, dtype, seed=0, scale=4.0):
    """Random logits in ``dtype`` and the float64 numpy copy of exactly those (rounded) values."""
    generator = torch.Generator().manual_seed(seed)
    logits = (torch.randn(*shape, generator=generator, dtype=torch.float64) * scale).to(dtype)
    return logits, logits.double().numpy()


@pytest.fixture
def small_chunks(monkeypatch):
    """Force several (uneven) row chunks: 3 rows of a 50-token vocabulary per chunk."""
    monkeypatch.setattr(tf, "_CHUNK_ELEMENTS", 150)


# ------------------------------------------------------------------------------------------------ log-probs


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_logprobs_match_float64_log_softmax(dtype, small_chunks):
    logits, logits_np = random_logits((2, 5, 50), dtype)
    labels = torch.randint(0, 50, (2, 5), generator=torch.Generator().manual_seed(1))
    expected = np.take_along_axis(np_log_softmax(logits_np), labels.numpy()[..., None], -1)[..., 0]
    result = tf.logprobs_from_logits(logits, labels)
    assert result.shape == (2, 5)
    assert result.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    np.testing.assert_allclose(result.double().numpy(), expected, atol=ATOL[dtype], rtol=0)
    naive = tf.logprobs_from_logits_naive(logits, labels)
    np.testing.assert_allclose(naive.double().numpy(), expected, atol=ATOL[dtype], rtol=0)


@pytest.mark.parametrize("inplace_backward", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_logprobs_gradient_matches_onehot_minus_softmax(dtype, inplace_backward, small_chunks):
    """d(sum g * logp)/d logits = g * (onehot(label) - softmax(logits)), through a Linear head as in an actor."""
    generator = torch.Generator().manual_seed(2)
    hidden = torch.randn(7, 8, generator=generator, dtype=torch.float64)
    head = torch.nn.Linear(8, 50, bias=False, dtype=dtype)
    torch.nn.init.normal_(head.weight, std=2.0, generator=generator)
    labels = torch.randint(0, 50, (7,), generator=generator)
    upstream = torch.randn(7, generator=generator, dtype=torch.float64)

    logits = head(hidden.to(dtype))
    logits_np = logits.detach().double().numpy()
    (tf.logprobs_from_logits(logits, labels, inplace_backward=inplace_backward) * upstream.float()).sum().backward()

    onehot = np.eye(50)[labels.numpy()]
    grad_logits = upstream.numpy()[:, None] * (onehot - np.exp(np_log_softmax(logits_np)))
    expected_weight_grad = grad_logits.T @ hidden.to(dtype).double().numpy()
    tolerance = 2e-2 if dtype == torch.bfloat16 else 1e-4
    np.testing.assert_allclose(head.weight.grad.double().numpy(), expected_weight_grad, atol=tolerance, rtol=tolerance)
    if not inplace_backward:
        np.testing.assert_array_equal(logits.detach().double().numpy(), logits_np)


def test_logprobs_leaf_logits_are_not_overwritten():
    logits, logits_np = random_logits((4, 50), torch.float32)
    logits.requires_grad_(True)
    labels = torch.tensor([0, 1, 2, 49])
    tf.logprobs_from_logits(logits, labels, inplace_backward=True).sum().backward()
    np.testing.assert_array_equal(logits.detach().double().numpy(), logits_np)
    expected = np.eye(50)[labels.numpy()] - np.exp(np_log_softmax(logits_np))
    np.testing.assert_allclose(logits.grad.double().numpy(), expected, atol=1e-6)


def test_logprobs_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3, 10\).*\(2, 4\)"):
        tf.logprobs_from_logits(torch.zeros(2, 3, 10), torch.zeros(2, 4, dtype=torch.long))


# ------------------------------------------------------------------------------------------------ entropy


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_entropy_matches_float64_reference(dtype):
    logits, logits_np = random_logits((3, 4, 60), dtype, seed=3)
    probs = np.exp(np_log_softmax(logits_np))
    expected = -(probs * np_log_softmax(logits_np)).sum(-1)
    tolerance = 1e-12 if dtype == torch.float64 else 5e-5
    np.testing.assert_allclose(tf.entropy_from_logits(logits).double().numpy(), expected, atol=tolerance)
    chunked = tf.entropy_from_logits_with_chunking(logits, chunk_size=5)
    np.testing.assert_allclose(chunked.double().numpy(), expected, atol=tolerance)


def test_entropy_of_uniform_and_one_hot_distributions():
    uniform = torch.zeros(2, 8)
    np.testing.assert_allclose(tf.entropy_from_logits(uniform).numpy(), [math.log(8)] * 2, rtol=1e-6)
    peaked = torch.full((1, 8), -1e4)
    peaked[0, 3] = 0.0
    assert abs(tf.entropy_from_logits(peaked).item()) < 1e-6


# ------------------------------------------------------------------------------------------------ masked reductions


def random_values_and_mask(seed: int, shape=(5, 7), fully_masked_row: int | None = 1):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=shape) * 3 + 1
    mask = (rng.random(shape) < 0.6).astype(np.float64)
    mask[0, 0] = mask[0, 1] = 1  # at least two unmasked elements overall
    if fully_masked_row is not None:
        mask[fully_masked_row] = 0
    return values, mask


@FAST
@given(seed=st.integers(0, 10_000))
def test_masked_sum_and_mean_match_numpy(seed):
    values, mask = random_values_and_mask(seed)
    values_with_nan = values.copy()
    values_with_nan[mask == 0] = np.nan  # padding garbage must not leak
    values_t, mask_t = torch.from_numpy(values_with_nan), torch.from_numpy(mask)
    selected = values[mask == 1]
    np.testing.assert_allclose(tf.masked_sum(values_t, mask_t).item(), selected.sum(), rtol=1e-12)
    np.testing.assert_allclose(tf.masked_mean(values_t, mask_t).item(), selected.mean(), rtol=1e-12)
    row_sums = np.where(mask == 1, values, 0).sum(-1)
    row_counts = mask.sum(-1)
    row_means = np.array([s / c if c else 0.0 for s, c in zip(row_sums, row_counts)])
    np.testing.assert_allclose(tf.masked_sum(values_t, mask_t, axis=-1).numpy(), row_sums, rtol=1e-12, atol=1e-12)
    result = tf.masked_mean(values_t, mask_t, axis=-1).numpy()
    np.testing.assert_allclose(result, row_means, rtol=1e-12, atol=1e-12)
    assert result[1] == 0.0  # fully masked row: 0, not NaN


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_masked_mean_low_precision_inputs(dtype):
    values, mask = random_values_and_mask(4)
    values_t = torch.from_numpy(values).to(dtype)
    rounded = values_t.double().numpy()
    expected = rounded[mask == 1].mean()
    result = tf.masked_mean(values_t, torch.from_numpy(mask).to(dtype))
    assert not torch.isnan(result)
    tolerance = 1e-2 if dtype == torch.bfloat16 else 1e-6
    np.testing.assert_allclose(result.double().item(), expected, rtol=tolerance, atol=tolerance)


@FAST
@given(seed=st.integers(0, 10_000), unbiased=st.booleans())
def test_masked_var_matches_numpy(seed, unbiased):
    values, mask = random_values_and_mask(seed)
    expected = np.var(values[mask == 1], ddof=1 if unbiased else 0)
    result = tf.masked_var(torch.from_numpy(values), torch.from_numpy(mask), unbiased=unbiased)
    np.testing.assert_allclose(result.item(), expected, rtol=1e-10)


def test_masked_var_refuses_too_few_elements():
    values = torch.randn(2, 3)
    with pytest.raises(ValueError, match="no unmasked element"):
        tf.masked_var(values, torch.zeros(2, 3))
    one = torch.zeros(2, 3)
    one[0, 0] = 1
    with pytest.raises(ValueError, match="single unmasked element"):
        tf.masked_var(values, one)
    assert tf.masked_var(values, one, unbiased=False).item() == 0.0


@FAST
@given(seed=st.integers(0, 10_000), shift_mean=st.booleans())
def test_masked_whiten_matches_numpy(seed, shift_mean):
    values, mask = random_values_and_mask(seed)
    selected = values[mask == 1]
    mean, var = selected.mean(), selected.var(ddof=1)
    expected = (values - mean) / np.sqrt(var + 1e-8) + (0 if shift_mean else mean)
    result = tf.masked_whiten(torch.from_numpy(values), torch.from_numpy(mask), shift_mean=shift_mean)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-9, atol=1e-9)
    whitened = result.numpy()[mask == 1]
    if shift_mean:
        assert abs(whitened.mean()) < 1e-9 and abs(whitened.std(ddof=1) - 1) < 1e-6


def test_masked_whiten_bf16_has_no_nan_and_unit_spread():
    values, mask = random_values_and_mask(5)
    result = tf.masked_whiten(torch.from_numpy(values).bfloat16(), torch.from_numpy(mask).bfloat16())
    assert not torch.isnan(result).any()
    whitened = result.double().numpy()[mask == 1]
    assert abs(whitened.mean()) < 0.05 and abs(whitened.std(ddof=1) - 1) < 0.05


def test_clip_by_value_matches_numpy_clip():
    values = torch.linspace(-3, 3, 13, dtype=torch.float64)
    np.testing.assert_array_equal(tf.clip_by_value(values, -1.5, 2.0).numpy(), np.clip(values.numpy(), -1.5, 2.0))


# ------------------------------------------------------------------------------------------------ masks and padding


def reference_response_mask(response_ids: list[list[int]], eos_ids: set[int]) -> list[list[int]]:
    mask = []
    for row in response_ids:
        ended, row_mask = False, []
        for token in row:
            row_mask.append(0 if ended else 1)
            ended = ended or token in eos_ids
        mask.append(row_mask)
    return mask


@FAST
@given(seed=st.integers(0, 10_000), eos=st.sampled_from([2, [2], [2, 7]]))
def test_get_response_mask_ends_after_first_eos(seed, eos):
    rng = np.random.default_rng(seed)
    response_ids = rng.integers(0, 9, size=(6, 8))
    response_ids[0] = 5  # no EOS at all: fully unmasked
    response_ids[1, 0] = 2  # EOS first: only the EOS token counts
    eos_ids = {eos} if isinstance(eos, int) else set(eos)
    result = tf.get_response_mask(torch.from_numpy(response_ids), eos_token=eos, dtype=torch.float32)
    assert result.dtype == torch.float32
    assert result.long().tolist() == reference_response_mask(response_ids.tolist(), eos_ids)


def test_compute_position_id_with_mask_left_padded():
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 0], [0, 0, 0, 0, 0]])
    expected = [[0, 0, 0, 1, 2], [0, 1, 2, 3, 3], [0, 0, 0, 0, 0]]
    assert tf.compute_position_id_with_mask(mask).tolist() == expected


def test_pad_sequence_to_length_and_2d_list():
    ids = torch.tensor([[1, 2], [3, 4]])
    assert tf.pad_sequence_to_length(ids, 4, 0).tolist() == [[1, 2, 0, 0], [3, 4, 0, 0]]
    assert tf.pad_sequence_to_length(ids, 3, 9, left_pad=True).tolist() == [[9, 1, 2], [9, 3, 4]]
    assert tf.pad_sequence_to_length(ids, 1, 0) is ids
    assert tf.pad_2d_list_to_length([[1], [2, 3, 4]], 0).tolist() == [[1, 0, 0], [2, 3, 4]]
    assert tf.pad_2d_list_to_length([[1], [2, 3]], 0, max_length=4).tolist() == [[1, 0, 0, 0], [2, 3, 0, 0]]


@pytest.mark.parametrize(
    ("truncation", "expected_ids"),
    [("left", [[3, 4, 5]]), ("right", [[1, 2, 3]]), ("middle", [[1, 4, 5]])],
)
def test_postprocess_data_truncation_modes(truncation, expected_ids):
    ids, mask = torch.tensor([[1, 2, 3, 4, 5]]), torch.ones(1, 5, dtype=torch.long)
    out_ids, out_mask = tf.postprocess_data(ids, mask, max_length=3, pad_token_id=0, truncation=truncation)
    assert out_ids.tolist() == expected_ids and out_mask.tolist() == [[1, 1, 1]]


def test_postprocess_data_pads_left_and_refuses_overlong():
    ids, mask = torch.tensor([[7, 8]]), torch.ones(1, 2, dtype=torch.long)
    out_ids, out_mask = tf.postprocess_data(ids, mask, max_length=4, pad_token_id=0)
    assert out_ids.tolist() == [[0, 0, 7, 8]] and out_mask.tolist() == [[0, 0, 1, 1]]
    with pytest.raises(ValueError, match=r"length 2.*max_length 1"):
        tf.postprocess_data(ids, mask, max_length=1, pad_token_id=0)


def test_tokenize_and_postprocess_data_with_real_tokenizer():
    from transformers import AutoTokenizer

    from tests.support.models import smollm2_path

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path())
    plain_ids = tokenizer("Natalia sold clips", add_special_tokens=False)["input_ids"]
    ids, mask = tf.tokenize_and_postprocess_data("Natalia sold clips", tokenizer, 12, tokenizer.pad_token_id)
    padding = 12 - len(plain_ids)
    assert ids.tolist() == [[tokenizer.pad_token_id] * padding + plain_ids]
    assert mask.tolist() == [[0] * padding + [1] * len(plain_ids)]


# ------------------------------------------------------------------------------------------------ unpad / pad


@FAST
@given(seed=st.integers(0, 10_000))
def test_unpad_then_pad_round_trips_with_python_reference(seed):
    rng = np.random.default_rng(seed)
    batch, seqlen, hidden = 4, 6, 3
    lengths = rng.integers(0, seqlen + 1, size=batch)
    lengths[0] = seqlen
    left = rng.integers(0, seqlen - lengths + 1)
    mask = np.zeros((batch, seqlen), dtype=np.int64)
    for row in range(batch):
        mask[row, left[row] : left[row] + lengths[row]] = 1
    states = rng.normal(size=(batch, seqlen, hidden))

    packed, indices, cu_seqlens, max_seqlen = unpad_input(torch.from_numpy(states), torch.from_numpy(mask))

    expected_packed = [states[r, c] for r in range(batch) for c in range(seqlen) if mask[r, c]]
    np.testing.assert_array_equal(packed.numpy(), np.array(expected_packed).reshape(-1, hidden))
    assert indices.tolist() == [r * seqlen + c for r in range(batch) for c in range(seqlen) if mask[r, c]]
    assert cu_seqlens.dtype == torch.int32 and cu_seqlens.tolist() == [0, *np.cumsum(lengths).tolist()]
    assert max_seqlen == lengths.max()
    repadded = pad_input(packed, indices, batch, seqlen).numpy()
    np.testing.assert_array_equal(repadded, np.where(mask[..., None] == 1, states, 0.0))


# ------------------------------------------------------------------------------------------------ LR schedules


def lr_factors(scheduler_fn, steps: int, **kwargs) -> list[float]:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = scheduler_fn(optimizer, **kwargs)
    factors = []
    for _ in range(steps):
        factors.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return factors


def test_constant_schedule_with_warmup_hand_values():
    factors = lr_factors(tf.get_constant_schedule_with_warmup, 7, num_warmup_steps=4)
    np.testing.assert_allclose(factors, [0, 0.25, 0.5, 0.75, 1, 1, 1])


def test_cosine_schedule_with_warmup_hand_values():
    factors = lr_factors(
        tf.get_cosine_schedule_with_warmup, 11, num_warmup_steps=2, num_training_steps=10, min_lr_ratio=0.1
    )
    # warmup 0, 0.5; then 0.1 + 0.9 * (1 + cos(pi * (s - 2) / 8)) / 2
    expected = [0.0, 0.5] + [0.1 + 0.9 * (1 + math.cos(math.pi * (s - 2) / 8)) / 2 for s in range(2, 11)]
    np.testing.assert_allclose(factors, expected, rtol=1e-12)
    assert factors[6] == pytest.approx(0.55) and factors[10] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="min_lr_ratio"):
        lr_factors(tf.get_cosine_schedule_with_warmup, 1, num_warmup_steps=0, num_training_steps=5, min_lr_ratio=2)


def test_expand_as_nested_repeats_each_row_value():
    from verl.utils.torch_functional import expand_as_nested

    nested = torch.nested.as_nested_tensor([torch.randn(2), torch.randn(3), torch.randn(4)], layout=torch.jagged)
    out = expand_as_nested(torch.tensor([1, 2, 3]), nested)
    assert out.values().tolist() == [1, 1, 2, 2, 2, 3, 3, 3, 3]
    assert torch.equal(out.offsets(), nested.offsets())
    with pytest.raises(AssertionError):
        expand_as_nested(torch.tensor([1, 2, 3]), torch.zeros(3))
    with pytest.raises(AssertionError):
        expand_as_nested(torch.tensor([1, 2, 3, 4]), nested)


def test_log_probs_from_logits_all_rmpad_matches_the_padded_computation():
    from verl.utils.torch_functional import log_probs_from_logits_all_rmpad

    generator = torch.Generator().manual_seed(3)
    batch, seqlen, vocab, response = 2, 5, 7, 2
    mask = torch.tensor([[0, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    input_ids = torch.randint(0, vocab, (batch, seqlen), generator=generator)
    logits = torch.randn(batch, seqlen, vocab, generator=generator, dtype=torch.float64)
    indices = mask.flatten().nonzero().squeeze(-1)
    ids_rmpad = input_ids.flatten()[indices].unsqueeze(0)
    logits_rmpad = logits.reshape(-1, vocab)[indices]
    out = log_probs_from_logits_all_rmpad(ids_rmpad, logits_rmpad, indices, batch, seqlen, response)
    # reference: token t+1 of each row scored by the row's logits at t (all response tokens are valid here)
    reference = torch.log_softmax(logits, -1)[:, :-1].gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    assert out.shape == (batch, response)
    torch.testing.assert_close(out, reference[:, -response:], rtol=0, atol=1e-12)


def test_sum_pi_squared_from_logits():
    from verl.utils.torch_functional import sum_pi_squared_from_logits

    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25], [1.0, 1e-12, 1e-12]], dtype=torch.float64))
    torch.testing.assert_close(sum_pi_squared_from_logits(logits), torch.tensor([0.375, 1.0], dtype=torch.float64))
