"""Which piece of the Megatron engine's CUDA path makes TP=2's weight gradients part from float32 (issue 16), in one
2-GPU call.

Session 9's GPU run of ``test_save_tp2_resume_pp2_and_merge``: on the same saved weights and batch, TP=2's step-3
grad norm is 4.44 while PP=2 gives 6.94 and the float32 single-process step 6.68; the gradients least like float32's
are TP=2's RMSNorm weights (cosine -0.66 .. 0.33), PP=2's all agree (cosine >= 0.92). On CPU (float32, gloo) every
layout matches float32 to 1e-5. So this runs the test's three steps (WARMUP schedule, ``update_batch`` seeds 1, 2,
3) at TP=2 once per variant, each changing one CUDA-only ingredient:

- ``bf16``: the engine as it is (bf16 autocast, torch's varlen flash attention, in-place chunked vocab-parallel
  log-prob backward);
- ``fp32``: ``megatron.dtype=float32`` (no autocast; attention falls back to per-sequence sdpa);
- ``sdpa``: bf16 with per-sequence sdpa instead of the varlen flash kernel;
- ``clone``: bf16 with the vocab-parallel log-prob given a copy of the logits (its backward writes the gradient into
  that copy, not into the model output's storage);
- ``maxconn1``: bf16 with ``CUDA_DEVICE_MAX_CONNECTIONS=1`` (megatron-core's expected setting for its
  asynchronous tensor-parallel all-reduce of input gradients);
- ``repeat``: bf16 with the varlen flash kernel, but key/value heads repeated to the query heads instead of passed
  as grouped-query heads (``enable_gqa``);
- ``capture``: bf16 as ``bf16``, with every attention call of step 3 on rank 0 recorded (q, k, v, boundaries, the
  output at forward time and at backward time, the gradient arriving at the output and the gradients the engine's
  backward gave q, k and v). Afterwards each call is replayed alone: the kernel's dq/dk/dv on those exact tensors,
  and the engine's, against float64 per-sequence attention. A kernel that is wrong on these inputs shows in both; an
  engine that feeds it something else (an output changed in place before the backward reads it, say) shows only in
  the engine's.
- ``capture1``: ``capture`` on rank 1, which holds the head padding (SmolLM2's 9/3 heads padded to 12/4 for TP=2:
  rank 1's query heads 9-11 and key/value head 3 are all-zero). The replay also gives the largest gradient the
  kernel and the engine put on an all-zero head (exactly 0 in exact arithmetic: training must keep the padding
  zero, and Adam turns any nonzero gradient, however small, into a step of about the learning rate).
- ``padded``: bf16 with ``VERL_PACKED_ATTENTION=padded`` (causal sdpa over the pack right-padded to a batch; the
  default from session 10 to 13; ``padded_flash`` since). Every other variant runs ``VERL_PACKED_ATTENTION=varlen``.
- ``varlen_tail``: ``bf16`` with each pack extended by a dummy sequence to a multiple of 128 tokens before the
  varlen kernel (``benchmarks.gpu.packed_attention.tail_padded``): right here if the kernel's last block writes
  past the pack's end.
- ``nocache``: ``bf16`` with ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` (every tensor its own cudaMalloc): if the varlen
  kernel's backward writes past one of its buffers into a neighbouring tensor of the caching allocator's pool, the
  gradients come out right here.

Session 9 ran the first six: only ``fp32`` and ``sdpa`` agreed with float32 (see
``benchmarks/results/gpu_session9_2026-11-27.md``); ``capture`` is for the next GPU call.

Per variant and for steps 1 and 3: loss, grad norm, the largest gradient in the head padding (and at step 3 the
largest weight there) and, against the float32 single-process step from the same
weights (``reference_step``), the cosine of every weight gradient (the five lowest, and the lowest among the norm
weights and among the rest). The variant whose gradients agree names the cause.

    PYTHONPATH=/tmp/site-mcore:/tmp/site-common:/tmp/site-model:$PWD python3 -m benchmarks.gpu.megatron_tp_grads
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile

import torch

VARIANTS = (
    "bf16",
    "fp32",
    "sdpa",
    "clone",
    "maxconn1",
    "repeat",
    "capture",
    "capture1",
    "padded",
    "nocache",
    "varlen_tail",
)

_records: list[dict] | None = None
"""Attention calls recorded by the ``capture`` variant (None: not recording)."""


def _recording_attention(original):
    """``packed_causal_attention`` that appends each call's inputs, output and gradients to :data:`_records`."""

    def attention(query, key, value, cu_seqlens, max_len, scale, *default_kernel):
        out = original(query, key, value, cu_seqlens, max_len, scale, *default_kernel)
        if _records is None or not torch.is_grad_enabled():
            return out
        record = {name: t.detach().clone() for name, t in (("q", query), ("k", key), ("v", value))}
        record.update(cu_seqlens=cu_seqlens.detach().clone(), max_len=max_len, scale=scale, out=out.detach().clone())
        for name, tensor in (("q", query), ("k", key), ("v", value)):
            if tensor.requires_grad:
                tensor.register_hook(lambda grad, name=name: record.__setitem__(f"engine_d{name}", grad.clone()))

        def at_backward(grad):
            record["grad_out"] = grad.detach().clone()
            record["out_at_backward"] = out.detach().clone()

        out.register_hook(at_backward)
        _records.append(record)
        return out

    return attention


def replay(records: list[dict]) -> dict:
    """Per recorded call, the kernel's and the engine's dq/dk/dv against float64 per-sequence attention (relative
    norm errors), and whether the output changed between forward and backward; the worst call of each."""
    from tests.workers.engine.fsdp.test_attention import _per_sequence_attention
    from verl.workers.engine.fsdp.attention import packed_causal_attention

    rows = []
    for index, r in enumerate(records):
        if "grad_out" not in r:
            continue
        lens = (r["cu_seqlens"][1:] - r["cu_seqlens"][:-1]).tolist()
        kernel_in = [r[n].clone().requires_grad_() for n in "qkv"]
        packed_causal_attention(*kernel_in, r["cu_seqlens"], r["max_len"], r["scale"]).backward(r["grad_out"])
        ref_in = [r[n].double().requires_grad_() for n in "qkv"]
        _per_sequence_attention(*ref_in, lens, r["scale"]).backward(r["grad_out"].double())
        row = {"call": index, "lens": lens, "heads": [r["q"].shape[1], r["k"].shape[1]], "max_len": r["max_len"]}
        row["tokens_vs_cu_seqlens"] = [r["q"].shape[0], int(r["cu_seqlens"][-1])]
        for name, kernel, ref in zip("qkv", kernel_in, ref_in, strict=True):
            scale = float(ref.grad.norm()) or 1e-30
            row[f"kernel_d{name}"] = float((kernel.grad.double() - ref.grad).norm()) / scale
            engine = r.get(f"engine_d{name}")
            row[f"engine_d{name}"] = None if engine is None else float((engine.double() - ref.grad).norm()) / scale
        row["out_changed_before_backward"] = float((r["out_at_backward"].float() - r["out"].float()).abs().max())
        row.update(_zero_head_grads(r, kernel_in))
        rows.append(row)
    summary = {"calls": len(rows), "first": rows[0] if rows else None}
    summary["max_len_mismatch"] = sum(row["max_len"] != max(row["lens"]) for row in rows)
    summary["length_mismatch"] = sum(row["tokens_vs_cu_seqlens"][0] != row["tokens_vs_cu_seqlens"][1] for row in rows)
    for key in ("kernel_dq", "kernel_dk", "kernel_dv", "engine_dq", "engine_dk", "engine_dv",
                "out_changed_before_backward", "zero_head_kernel_grad", "zero_head_engine_grad"):  # fmt: skip
        values = [(row[key], row) for row in rows if row.get(key) is not None]
        if values:
            worst = max(values, key=lambda pair: pair[0])
            summary[key] = {"max": worst[0], "call": worst[1]["call"], "lens": worst[1]["lens"]}
    return summary


def _zero_head_grads(record: dict, kernel_in: list[torch.Tensor]) -> dict:
    """Largest |gradient| the kernel (replayed) and the engine gave the all-zero key/value heads and their query
    groups; empty when no head is all-zero."""
    k, v = record["k"], record["v"]
    zero_kv = [h for h in range(k.shape[1]) if not k[:, h].any() and not v[:, h].any()]
    if not zero_kv:
        return {}
    groups = record["q"].shape[1] // k.shape[1]
    heads = {"q": [g * groups + i for g in zero_kv for i in range(groups)], "k": zero_kv, "v": zero_kv}
    out = {"zero_kv_heads": zero_kv, "zero_head_kernel_grad": 0.0, "zero_head_engine_grad": 0.0}
    for tensor, name in zip(kernel_in, "qkv", strict=True):
        out["zero_head_kernel_grad"] = max(out["zero_head_kernel_grad"], float(tensor.grad[:, heads[name]].abs().max()))
        engine = record.get(f"engine_d{name}")
        if engine is not None:
            out["zero_head_engine_grad"] = max(out["zero_head_engine_grad"], float(engine[:, heads[name]].abs().max()))
    return out


def _padding_max(tensors: dict, original_shapes: dict) -> float:
    """Largest |value| in the head padding of full padded-model tensors."""
    from verl.models.mcore.pad_heads import drop_padding

    _, padding = drop_padding(tensors, original_shapes)
    return max((float(t.abs().max()) for t in padding.values() if t.numel()), default=0.0)


def _apply(variant: str) -> dict:
    """Patch this rank's process for ``variant``; returns engine overrides."""
    if variant == "maxconn1":
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    from benchmarks.gpu.packed_attention import use_kernel

    use_kernel(variant if variant in ("padded", "varlen_tail") else "varlen")
    if variant == "sdpa":
        from verl.models.mcore import attention
        from verl.workers.engine.fsdp.attention import _cpu_varlen

        attention.packed_causal_attention = lambda q, k, v, cu, max_len, scale, *_: _cpu_varlen(q, k, v, cu, scale)
    if variant == "repeat":
        from verl.workers.engine.fsdp import attention

        attention._kv_heads_native = False
    if variant in ("capture", "capture1"):
        from verl.models.mcore import attention

        attention.packed_causal_attention = _recording_attention(attention.packed_causal_attention)
    if variant == "clone":
        from verl.workers.engine.megatron import engine as engine_module

        original = engine_module.vocab_parallel_log_probs_entropy
        engine_module.vocab_parallel_log_probs_entropy = lambda logits, *a, **k: original(logits.clone(), *a, **k)
    return {"dtype": "float32"} if variant == "fp32" else {}


def _rank(rank, world, path, variant):
    from tests.utils.checkpoint.test_megatron_checkpoint_manager import WARMUP, _step
    from tests.workers.engine.fsdp.distributed import update_batch
    from tests.workers.engine.megatron.helpers import capture_clipped_grads, full_hf_tensors, megatron_actor

    overrides = _apply(variant)
    batches = [update_batch(seed=seed) for seed in (1, 2, 3)]
    for batch in batches:
        batch["ref_log_prob"] = batch["old_log_probs"] + 0.1 * batch["response_mask"]
    engine, actor = megatron_actor(path, tp=2, optim_overrides=WARMUP, **overrides)
    global _records
    out = {}
    for step, batch in enumerate(batches, start=1):
        if step == 3:
            out["weights"] = {k: v.detach().cpu().clone() for k, v in engine.iter_full_state_dict()}
            _records = [] if (variant, rank) in (("capture", 0), ("capture1", 1)) else None
        captured = capture_clipped_grads(engine)
        metrics = _step(engine, actor, batch)
        if _records is not None:
            out["attention"] = replay(_records)
            _records = None
        if step in (1, 3):
            grads = full_hf_tensors(engine, captured)
            out[step] = {
                "pg_loss": float(metrics["actor/pg_loss"][0]),
                "grad_norm": float(metrics["actor/grad_norm"][0]),
                "grads": {k: v.detach().float().cpu() for k, v in grads.items()},
            }
    if rank == 1:
        return {"attention": out["attention"]} if "attention" in out else None
    return out


def agreement(grads: dict, reference: dict) -> dict:
    """Cosine of each gradient with the reference's: the five lowest, the lowest norm weight and other weight."""
    rows = []
    for key, ref in reference.items():
        if key in grads and grads[key].shape == ref.shape:
            cos = float(torch.nn.functional.cosine_similarity(grads[key].flatten(), ref.float().flatten(), dim=0))
            rows.append((cos, key))
    rows.sort()
    norms = [r for r in rows if "norm" in r[1]]
    rest = [r for r in rows if "norm" not in r[1]]
    return {
        "lowest": [f"{k} {c:.3f}" for c, k in rows[:5]],
        "lowest_norm": f"{norms[0][1]} {norms[0][0]:.3f}" if norms else None,
        "lowest_other": f"{rest[0][1]} {rest[0][0]:.3f}" if rest else None,
        "tensors": len(rows),
    }


def _export(base: str, weights: dict, folder: str) -> str:
    """``base``'s model folder with ``weights`` in place of its own (float32)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    model.load_state_dict({**model.state_dict(), **weights}, strict=True)
    model.save_pretrained(folder)
    for name in os.listdir(base):
        if name.startswith("tokenizer") or name.endswith(".txt") or name == "special_tokens_map.json":
            shutil.copy(os.path.join(base, name), folder)
    return folder


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args(argv)
    from safetensors.torch import load_file

    from tests.support.models import smollm2_path, tp_padded_model_path
    from tests.workers.actor.test_dp_actor import reference_step
    from tests.workers.engine.fsdp.distributed import run_on_ranks, update_batch

    padded = tp_padded_model_path(smollm2_path(), 2)
    reference_batches = {}
    for step, seed in ((1, 1), (3, 3)):
        batch = update_batch(seed=seed)
        batch["ref_log_prob"] = batch["old_log_probs"] + 0.1 * batch["response_mask"]
        reference_batches[step] = batch
    step1_ref = reference_step(padded, reference_batches[1])
    original_shapes = {k: v.shape for k, v in load_file(os.path.join(smollm2_path(), "model.safetensors")).items()}
    results = []
    for variant in args.variants.split(","):
        if variant == "nocache":  # read when CUDA starts in the spawned ranks
            os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        try:
            outs = run_on_ranks(_rank, 2, padded, variant)
            out = outs[0]
            if outs[1]:
                out["attention"] = outs[1]["attention"]
        except Exception as exc:  # a variant that fails is a finding too
            results.append({"variant": variant, "error": f"{type(exc).__name__}: {exc}"[:500]})
            print(json.dumps(results[-1]), flush=True)
            continue
        finally:
            os.environ.pop("PYTORCH_NO_CUDA_MEMORY_CACHING", None)
        if "attention" in out:
            results.append({"variant": variant, "attention_replay": out["attention"]})
            print(json.dumps(results[-1]), flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            step3_ref = reference_step(_export(padded, out["weights"], tmp), reference_batches[3])
        for step, ref in ((1, step1_ref), (3, step3_ref)):
            row = {"variant": variant, "step": step, "pg_loss": round(out[step]["pg_loss"], 5)}
            row.update(grad_norm=round(out[step]["grad_norm"], 4), fp32_pg_loss=round(float(ref[0]), 5))
            row["fp32_grad_norm"] = round(float(ref[1]), 4)
            row["padding_grad_max"] = _padding_max(out[step]["grads"], original_shapes)
            if step == 3:
                row["padding_weight_max"] = _padding_max(out["weights"], original_shapes)
            row.update(agreement(out[step]["grads"], ref[2]))
            results.append(row)
            print(json.dumps(row), flush=True)
    return results


if __name__ == "__main__":
    main()
