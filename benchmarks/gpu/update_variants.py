"""What ``benchmarks.bench_gpu_update`` runs: the model shapes (random weights from these config dicts), each
variant's switches over ``BASE`` (the engine's default path), and which variants each shape runs by default and which
are profiled. The benchmark applies a variant's switches in ``run_variant``."""

from __future__ import annotations

SHAPES = {
    # Qwen2.5-0.5B's config (24 layers, hidden 896, 14 query / 2 KV heads of 64, vocabulary 151936, tied)
    "qwen2.5-0.5b": dict(
        model_type="qwen2",
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        vocab_size=151936,
        max_position_embeddings=32768,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
    ),
    # SmolLM2-135M's config (30 layers, hidden 576, 9 query / 3 KV heads of 64, vocabulary 49152, tied)
    "smollm2-135m": dict(
        model_type="llama",
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        head_dim=64,
        vocab_size=49152,
        max_position_embeddings=8192,
        rope_theta=100000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
    ),
    "tiny": dict(
        model_type="llama",
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1000,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
    ),
}

BASE = dict(
    attn="verl_varlen",
    fused=False,
    liger=False,
    compile=False,
    ckpt=False,
    act_offload=False,
    tokens=32768,
    reshard=True,
    kernel=None,  # VERL_PACKED_ATTENTION for verl_varlen on CUDA (None: the FSDP default, ``varlen`` since session 18)
    fused_adam=False,  # optim.override_optimizer_config.fused: AdamW's step as one kernel instead of foreach ops
    logprob=None,  # VERL_LOGPROB_KERNEL ("compile": the chunked torch.compile log-prob head; None: Triton on CUDA)
    static=False,  # compile the decoder layers for each micro-batch's exact length (the engine: dynamic=True)
    nd_tiling=None,  # inductor's prefer_nd_tiling in the layers' element-wise kernels (None: the engine's default,
    # on since session 32; False: the layers compiled without it, as before)
    rope_tokens=False,  # RoPE on the token-major projections (benchmarks/gpu/rope_layout.py)
    root_only=False,  # fsdp_config.wrap_policy.transformer_layer_cls_to_wrap=[]: one FSDP2 unit, the root
    rows=False,  # the output layer on the response rows alone on CUDA too (session 34: the default on the CPU only)
)
VARIANTS = {
    "sdpa+logits": dict(attn="sdpa"),  # the previous default path: block-diagonal mask, full logits
    "varlen+logits": dict(),
    "varlen+fused": dict(fused=True),
    "varlen+fused+liger": dict(fused=True, liger=True),
    "varlen+logits+liger": dict(liger=True),
    "varlen+logits+compile": dict(compile=True),
    "varlen+fused+liger+ckpt": dict(fused=True, liger=True, ckpt=True),
    "varlen+fused+act_offload": dict(fused=True, act_offload=True),
    "varlen+fused+compile": dict(fused=True, compile=True),
    "varlen+logits+compile+mb64k": dict(compile=True, tokens=65536),
    # one rank holds every parameter anyway: keep the bf16 copy from forward to backward (no second all-gather)
    "varlen+logits+compile+noreshard": dict(compile=True, reshard=False),
    "varlen+fused+liger+mb64k": dict(fused=True, liger=True, tokens=65536),
    # the best variant again, profiled with Python stacks: which code launches the copies (session 4's profile
    # had 2,993 aten::copy_ and 1,634 device-to-device memcpys a step, 74 ms of 609)
    "varlen+logits+compile+stacks": dict(compile=True),
    # torch's varlen flash kernel instead of the default padded batch (session 10: wrong Megatron TP=2 gradients)
    "varlen+logits+compile+fa2": dict(compile=True, kernel="varlen"),
    # the same with each pack's tail padded by a dummy sequence (benchmarks.gpu.packed_attention.tail_padded)
    "varlen+logits+compile+fa2tail": dict(compile=True, kernel="varlen_tail"),
    # the padded kernel with torch's jagged <-> padded copy kernels instead of index_put / gather
    "varlen+logits+compile+jagged": dict(compile=True, kernel="padded_jagged"),
    # the padded kernel kept off cuDNN's sdpa backend (about 1 ms of host time a call, session 13)
    "varlen+logits+compile+flash": dict(compile=True, kernel="padded_flash"),
    # the padded kernel on the backend sdpa picks (cuDNN on an H100; the default until session 14)
    "varlen+logits+compile+cudnn": dict(compile=True, kernel="padded"),
    # AdamW as one fused kernel (session 13's profile: 23 ms of foreach kernels a step against a ~6 ms floor)
    "varlen+logits+compile+fusedadam": dict(compile=True, fused_adam=True),
    # fused AdamW with each attention kernel named (session 18 on an H200: varlen 0.575 s, padded_flash 0.694 s,
    # cuDNN's padded 0.724 s); without a kernel named, a variant runs the FSDP default (padded_flash before session 18)
    "varlen+logits+compile+fusedadam+fa2": dict(compile=True, fused_adam=True, kernel="varlen"),
    "varlen+logits+compile+fusedadam+flash": dict(compile=True, fused_adam=True, kernel="padded_flash"),
    "varlen+logits+compile+fusedadam+cudnn": dict(compile=True, fused_adam=True, kernel="padded"),
    # the default path (varlen, fused AdamW) with a kernel-time profile of one step: where the 40% target's time goes
    "varlen+logits+compile+fusedadam+profile": dict(compile=True, fused_adam=True),
    # the same keeping the bf16 parameters gathered from forward to backward, and (since session 31) from the first
    # micro-batch's forward to the last one's backward (one rank holds them all anyway; slower in session 5 with the
    # padded kernel and foreach AdamW, when it still gathered once a micro-batch)
    "varlen+logits+compile+fusedadam+noreshard": dict(compile=True, fused_adam=True, reshard=False),
    # the log-prob head as torch.compile'd chunks, the default until session 19 (session 19's profile: 52 ms of its
    # element-wise kernels a step, about 4x their memory-traffic floor); the default is now two Triton kernels
    "varlen+logits+compile+fusedadam+tlcompile": dict(compile=True, fused_adam=True, logprob="compile"),
    # session 19's profile: RoPE's compiled element-wise kernels (forward 216 us, backward 355 us a layer and
    # micro-batch) run at about a fifth of their memory-traffic floor, as the log-prob chunks did; the dynamic token
    # dimension is the suspect (inductor's coalescing analysis skips dynamic shapes). Static shapes bound the gain
    # (the bench's micro-batches repeat every step, so each length compiles once); nd tiling is the cheap cure to try
    "varlen+logits+compile+fusedadam+static": dict(compile=True, fused_adam=True, static=True),
    # session 32 made nd tiling the engine's default on CUDA (the compiled layers' options): "+ndtiling" now runs
    # the default path, "+nondtiling" the path before
    "varlen+logits+compile+fusedadam+ndtiling": dict(compile=True, fused_adam=True, nd_tiling=True),
    "varlen+logits+compile+fusedadam+nondtiling": dict(compile=True, fused_adam=True, nd_tiling=False),
    # session 32: both levers together (noreshard 1.3%, ndtiling 2.2% faster than the default in one call)
    "varlen+logits+compile+fusedadam+noreshard+ndtiling": dict(
        compile=True, fused_adam=True, reshard=False, nd_tiling=True
    ),
    "varlen+logits+compile+fusedadam+ropetokens": dict(compile=True, fused_adam=True, rope_tokens=True),
    # session 25: the update is near host-bound (session 20's profile: 442 ms of kernels in a 507 ms step). On a world
    # of one, per-layer units only add hooks and per-parameter gathers per layer and micro-batch; the root alone
    # gathers the whole model once per micro-batch (exactly the same arithmetic: tests/workers/engine/fsdp)
    "varlen+logits+compile+fusedadam+rootonly": dict(compile=True, fused_adam=True, root_only=True),
    # session 34: the output layer on the response rows alone (transformers' logits_to_keep), the default on the CPU
    # (the demo's update 21.3 -> 17.1 s); on CUDA only with "+rows". Its first GPU run (0.554 s a step against 0.494
    # s for every row, on another machine) was not an A/B
    "varlen+logits+compile+fusedadam+rows": dict(compile=True, fused_adam=True, rows=True),
}
PROFILED = {
    "varlen+logits+compile",
    "varlen+fused+liger",
    "varlen+logits+compile+fusedadam+profile",
    "varlen+logits+compile+fusedadam+static",
}
"""Variants that also print a kernel-time profile of one step (where the time goes)."""
STACK_PROFILED = {"varlen+logits+compile+stacks"}
"""Variants that print the device time of copy ops grouped by the Python stack that launched them."""
PLAN = {  # shape -> variants run by default, most telling first (a time budget may cut the tail)
    "qwen2.5-0.5b": [
        "varlen+logits+compile",
        "varlen+logits+compile+noreshard",
        "varlen+logits",
        "varlen+fused+compile",
        "varlen+fused+liger",
        "varlen+fused+liger+ckpt",
        "sdpa+logits",
    ],
    "smollm2-135m": ["varlen+logits+compile+mb64k", "varlen+logits+compile", "varlen+logits", "varlen+fused+liger"],
    "tiny": ["sdpa+logits", "varlen+logits", "varlen+fused", "varlen+fused+act_offload"],
}
BASELINE = "sdpa+logits"
"""The path before this benchmark's work: transformers' sdpa with a block-diagonal mask, full float32 logits."""
