"""``verl_varlen`` attention on CPU: packed micro-batches give the log-probs and gradients of per-sequence
forwards, the boundaries are read from position ids when the kwargs are missing, and generation (padding, KV
cache) takes transformers' sdpa path unchanged."""

from __future__ import annotations

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import reference_log_probs, rollout_batch


def _model(arch: str, attn: str):
    from transformers import AutoModelForCausalLM

    import verl.workers.engine.fsdp.attention  # noqa: F401  (registers verl_varlen)

    return AutoModelForCausalLM.from_pretrained(tiny_model_path(arch), dtype=torch.float32, attn_implementation=attn)


def test_cu_seqlens_from_position_ids_hand_example():
    from verl.workers.engine.fsdp.attention import cu_seqlens_from_position_ids

    cu_seqlens, max_len = cu_seqlens_from_position_ids(torch.tensor([[0, 1, 2, 0, 0, 1, 2, 3]]))
    assert cu_seqlens.tolist() == [0, 3, 4, 8] and cu_seqlens.dtype == torch.int32
    assert max_len == 4


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_packed_log_probs_and_grads_match_per_sequence_reference(arch):
    from verl.workers.engine.fsdp.forward import forward_log_probs

    batch = rollout_batch(batch_size=6, seed=1)
    reference = _model(arch, "sdpa")
    with torch.no_grad():
        expected = reference_log_probs(reference, batch)
    mask = batch["response_mask"].bool()
    response_length = batch["responses"].shape[1]

    grads = {}
    for attn in ("sdpa", "verl_varlen"):  # sdpa: the block-diagonal-mask path, an independent kernel
        model = _model(arch, attn)
        log_probs, _ = forward_log_probs(
            model, batch["input_ids"], batch["attention_mask"], batch["position_ids"], use_remove_padding=True
        )
        log_probs = log_probs[:, -response_length - 1 : -1]
        torch.testing.assert_close(log_probs[mask], expected[mask], atol=2e-5, rtol=1e-5)
        log_probs[mask].sum().backward()
        grads[attn] = {name: p.grad.clone() for name, p in model.named_parameters()}
    for name, grad in grads["sdpa"].items():
        scale = float(grad.abs().max())
        torch.testing.assert_close(grads["verl_varlen"][name], grad, atol=2e-5 * scale + 1e-7, rtol=0, msg=name)


def test_packed_call_without_boundary_kwargs_reads_position_ids():
    from verl.workers.engine.fsdp.packing import pack

    batch = rollout_batch(batch_size=5, seed=2)
    packed = pack(batch["input_ids"], batch["attention_mask"], batch["position_ids"])
    model = _model("llama", "verl_varlen")
    with torch.no_grad():
        with_kwargs = model(
            input_ids=packed.input_ids, position_ids=packed.position_ids, **packed.attention_kwargs()
        ).logits
        without = model(input_ids=packed.input_ids, position_ids=packed.position_ids).logits
    torch.testing.assert_close(without, with_kwargs, atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    ("total", "is_causal", "match"), [(9, True, "cu_seq_lens_q\\[-1\\]=9, 7 tokens"), (7, False, "non-causal")]
)
def test_boundaries_that_do_not_fit_the_call_are_refused(total, is_causal, match):
    """Boundaries of another call (the text pack's reaching a vision tower, issue 21) must not run silently: on
    CUDA they read out of bounds."""
    from verl.workers.engine.fsdp.attention import varlen_attention_forward

    module = torch.nn.Module()
    module.is_causal = is_causal
    query = key = value = torch.randn(1, 2, 7, 4)  # (1, H, T, D)
    cu_seqlens = torch.tensor([0, 3, total], dtype=torch.int32)
    with pytest.raises(ValueError, match=match):
        varlen_attention_forward(module, query, key, value, None, cu_seq_lens_q=cu_seqlens, max_length_q=6)


def test_generation_with_padding_and_cache_is_unchanged():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path("llama"))
    tokenizer.padding_side = "left"
    inputs = tokenizer(["1 + 1 =", "a much longer prompt than the first one"], return_tensors="pt", padding=True)
    outputs = {}
    for attn in ("sdpa", "verl_varlen"):
        torch.manual_seed(0)
        outputs[attn] = _model("llama", attn).generate(
            **inputs, max_new_tokens=6, do_sample=False, pad_token_id=tokenizer.pad_token_id
        )
    assert torch.equal(outputs["verl_varlen"], outputs["sdpa"])


def test_the_engine_picks_varlen_attention():
    from verl.workers.engine.fsdp.model_builder import pick_attn_implementation

    assert pick_attn_implementation() == "verl_varlen"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_cuda_varlen_kernel_matches_per_sequence_sdpa(arch):
    """torch's varlen kernel (grouped-query heads passed as they are) against per-sequence sdpa, bf16 on the GPU."""
    from verl.workers.engine.fsdp.attention import _cpu_varlen, _cuda_varlen

    lens = [300, 7, 512, 1, 90]
    cu_seqlens = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    heads = (14, 2) if arch == "qwen2" else (9, 3)
    q, k, v = (torch.randn(sum(lens), h, 64, device="cuda", dtype=torch.bfloat16) for h in (heads[0], *heads[1:] * 2))
    out = _cuda_varlen(q, k, v, cu_seqlens, max(lens), 64**-0.5)
    ref = _cpu_varlen(q.float(), k.float(), v.float(), cu_seqlens, 64**-0.5)
    assert float((out.float() - ref).norm() / ref.norm()) < 1e-2


def _per_sequence_attention(q, k, v, lens, scale):
    """Plain causal softmax attention of each sequence alone, key/value heads repeated for grouped queries."""
    groups = q.shape[1] // k.shape[1]
    outs, start = [], 0
    for length in lens:
        qs, ks, vs = (t[start : start + length].transpose(0, 1) for t in (q, k, v))  # (H, len, D)
        ks, vs = ks.repeat_interleave(groups, 0), vs.repeat_interleave(groups, 0)
        scores = (qs @ ks.transpose(1, 2)) * scale
        causal = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
        outs.append((scores.masked_fill(~causal, float("-inf")).softmax(-1) @ vs).transpose(0, 1))
        start += length
    return torch.cat(outs)


def test_packed_causal_attention_matches_plain_attention_per_sequence():
    from verl.workers.engine.fsdp.attention import packed_causal_attention

    lens = [5, 1, 9]
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(sum(lens), h, 8, generator=gen, dtype=torch.float64) for h in (4, 2, 2))
    cu_seqlens = torch.tensor([0, 5, 6, 15], dtype=torch.int32)
    out = packed_causal_attention(q, k, v, cu_seqlens, max(lens), 0.3)
    torch.testing.assert_close(out, _per_sequence_attention(q, k, v, lens, 0.3), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kernel", ["padded", "padded_jagged", "padded_flash"])
@pytest.mark.parametrize("lens, heads", [([5, 1, 9], (4, 2)), ([1], (3, 3)), ([7, 7, 2, 12], (6, 2))])
def test_padded_kernel_output_and_gradients_match_plain_attention_per_sequence(lens, heads, kernel):
    """The ``padded`` CUDA kernel's arithmetic (and ``padded_jagged``'s: the same batch built by torch's jagged <->
    padded copies), run on CPU in float64: output and dq/dk/dv equal the plain per-sequence attention's, padding rows
    contribute nothing (a length-1 sequence beside a long one pads 11 rows)."""
    from verl.workers.engine.fsdp.attention import CUDA_KERNELS

    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(sum(lens), h, 8, generator=gen, dtype=torch.float64, requires_grad=True) for h in
               (heads[0], heads[1], heads[1]))  # fmt: skip
    grad_out = torch.randn(sum(lens), heads[0], 8, generator=gen, dtype=torch.float64)
    cu_seqlens = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    out = CUDA_KERNELS[kernel](q, k, v, cu_seqlens, max(lens), 0.3)
    grads = torch.autograd.grad(out, (q, k, v), grad_out)
    ref = _per_sequence_attention(q, k, v, lens, 0.3)
    ref_grads = torch.autograd.grad(ref, (q, k, v), grad_out)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    for name, got, want in zip("qkv", grads, ref_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10, msg=f"d{name}")


def test_padded_flash_kernel_traces_whole_under_torch_compile():
    """The backend restriction of ``padded_flash`` is a context manager inside the compiled decoder layers: dynamo
    traces it without a graph break (``fullgraph``), and the result is the eager one."""
    from verl.workers.engine.fsdp.attention import CUDA_KERNELS

    lens = [5, 1, 9]
    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(sum(lens), h, 8, generator=gen) for h in (4, 2, 2))
    cu_seqlens = torch.tensor([0, 5, 6, 15], dtype=torch.int32)
    kernel = CUDA_KERNELS["padded_flash"]
    compiled = torch.compile(kernel, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(q, k, v, cu_seqlens, 9, 0.3), kernel(q, k, v, cu_seqlens, 9, 0.3))


def test_packed_attention_kernel_is_chosen_by_env_and_a_wrong_name_is_refused(monkeypatch):
    """Unset, the FSDP engine gets torch's varlen kernel on an Ampere-or-newer device (``padded_flash`` on a torch
    without one, an older device, or a head size FlashAttention-2 does not take) and the Megatron engine
    ``padded_flash``; the variable overrides both."""
    from verl.workers.engine.fsdp import attention

    monkeypatch.delenv("VERL_PACKED_ATTENTION", raising=False)
    monkeypatch.setattr(attention, "_cuda_capability", lambda: (9, 0))  # an H100
    assert attention.cuda_kernel() is attention._cuda_varlen
    assert attention.cuda_kernel(head_dim=128) is attention._cuda_varlen
    assert attention.cuda_kernel(attention.MEGATRON_CUDA_KERNEL, 128) is attention._padded_flash_sdpa
    for head_dim in (100, 512):  # not a multiple of 8; over 256
        assert attention.cuda_kernel(head_dim=head_dim) is attention._padded_flash_sdpa
    assert attention.cuda_kernel(head_dim=64, dtype=torch.bfloat16) is attention._cuda_varlen
    assert attention.cuda_kernel(head_dim=64, dtype=torch.float32) is attention._padded_flash_sdpa  # a float32 model
    monkeypatch.setattr(attention, "_cuda_capability", lambda: (7, 0))  # a V100
    assert attention.cuda_kernel(head_dim=128) is attention._padded_flash_sdpa
    monkeypatch.setattr(attention, "_cuda_capability", lambda: (8, 0))
    monkeypatch.setattr(attention, "_cuda_varlen_kernel", lambda: None)  # a torch before 2.10
    assert attention.cuda_kernel(head_dim=128) is attention._padded_flash_sdpa
    monkeypatch.undo()
    monkeypatch.setenv("VERL_PACKED_ATTENTION", "varlen")  # named, it is not replaced on a device it cannot run on
    monkeypatch.setattr(attention, "_cuda_capability", lambda: (7, 0))
    assert attention.cuda_kernel(head_dim=100) is attention._cuda_varlen
    monkeypatch.setenv("VERL_PACKED_ATTENTION", "padded")
    assert attention.cuda_kernel() is attention._padded_sdpa
    assert attention.cuda_kernel(attention.MEGATRON_CUDA_KERNEL) is attention._padded_sdpa
    monkeypatch.setenv("VERL_PACKED_ATTENTION", "flash3")
    with pytest.raises(ValueError, match="VERL_PACKED_ATTENTION='flash3'.*padded"):
        attention.cuda_kernel()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("engine_default, op", [("padded_flash", "aten::scaled_dot_product_attention"),
                                                 ("varlen", "torch_attn::_varlen_attn")])  # fmt: skip
def test_packed_causal_attention_is_one_kernel_call_on_cuda(monkeypatch, engine_default, op):
    """bf16 on the GPU with each engine's default kernel (Megatron: ``padded_flash``; FSDP: ``varlen``): the whole
    pack of 100 sequences in one attention call, not one per sequence."""
    from torch.profiler import ProfilerActivity, profile

    from verl.workers.engine.fsdp.attention import packed_causal_attention

    monkeypatch.delenv("VERL_PACKED_ATTENTION", raising=False)
    lens = [300, 7, 512, 1, 90] * 20
    cu_seqlens = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(sum(lens), h, 64, device="cuda", dtype=torch.bfloat16) for h in (12, 4, 4))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        out = packed_causal_attention(q, k, v, cu_seqlens, max(lens), 64**-0.5, engine_default)
    calls = [e.count for e in prof.key_averages() if e.key == op]
    assert calls == [1]
    ref = _per_sequence_attention(q.float(), k.float(), v.float(), lens, 64**-0.5)
    assert float((out.float() - ref).norm() / ref.norm()) < 1e-2


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("kernel", ["varlen", "padded", "padded_jagged", "padded_flash"])
@pytest.mark.parametrize("heads", [(6, 2), (12, 4), (14, 2)])
@pytest.mark.parametrize("lens", [[9, 4, 1], [11, 2], [300, 7, 512, 1, 90]])
def test_cuda_packed_kernels_gradients_match_float32_per_sequence(kernel, heads, lens):
    """dq, dk, dv of each CUDA kernel of :data:`CUDA_KERNELS` (bf16) against float32 per-sequence attention.

    Megatron TP=2's shapes (sessions 9-10, ``benchmarks/gpu/megatron_tp_grads.py``): micro-batches pack two short
    sequences (2-11 tokens) and a one-token padding sequence, 6 query / 2 key-value heads per rank (SmolLM2 padded to
    12/4, split over two ranks); and a long pack. Both kernels pass call by call (session 10, H200 and H100), yet
    ``varlen`` gave TP=2 weight gradients far from float32's (grad norm 4.44 vs 6.73; ``padded`` 6.61): its damage is
    outside the tensors it returns, which this test cannot see."""
    from verl.workers.engine.fsdp.attention import CUDA_KERNELS

    gen = torch.Generator(device="cuda").manual_seed(0)
    cu_seqlens = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    q, k, v = (
        torch.randn(sum(lens), h, 64, device="cuda", generator=gen).to(torch.bfloat16).requires_grad_()
        for h in (heads[0], heads[1], heads[1])
    )
    grad_out = torch.randn(sum(lens), heads[0], 64, device="cuda", generator=gen).to(torch.bfloat16)
    CUDA_KERNELS[kernel](q, k, v, cu_seqlens, max(lens), 64**-0.5).backward(grad_out)
    ref_inputs = [t.detach().float().requires_grad_() for t in (q, k, v)]
    _per_sequence_attention(*ref_inputs, lens, 64**-0.5).backward(grad_out.float())
    for name, got, ref in zip("qkv", (q, k, v), ref_inputs, strict=True):
        error = float((got.grad.float() - ref.grad).norm() / ref.grad.norm())
        assert error < 2e-2, f"{kernel} d{name}: relative error {error:.4f}"
