"""Where the actor update of a packed multimodal micro-batch turns non-finite (issue 21), in one GPU call.

Session 5's GPU run (random Qwen2-VL-2B shape, FSDP2 bf16 mixed precision, ``use_remove_padding=True``, update
micro-batches of 16 sequences with one 84-pixel image each, 48 prompt + 64 response tokens; on the HF rollout, as
it turned out) logged ``actor/grad_norm: nan`` at every step with advantages 0, while the same keys on CPU give
0.000. With advantages 0 the loss is ``kl_loss_coef * low_var_kl(log_prob, ref_log_prob)``, whose gradient is small
but not 0 when the reference pass packs other micro-batches (32 sequences) than the update (16).

This script builds that model in memory (:mod:`verl.models.random_vlm`), a batch of the shapes task through the
real dataset, random responses (placeholder ids excluded), and for each variant runs the trainer's math once:
reference log-probs without grad over micro-batches of ``--ref-micro-batch``, then for each update micro-batch
``forward_log_probs`` with entropy (detached, as the actor does) -> ``kl_loss_coef * agg_loss(low_var_kl)`` ->
backward. Printed per variant, one JSON line: whether the loss, the log-probs and each gradient are finite, the
first module (forward order) whose output is non-finite in forward, the modules whose gradients w.r.t. their
output are non-finite, in the order backward reaches them (the NaN was born in the backward of whatever consumes
the first one's output), and the grad norm. Variants:

- ``attn``: ``verl_varlen`` (the default on CUDA: torch's varlen flash kernel) or ``sdpa`` (block-diagonal mask);
- ``gqa``: for verl_varlen, the kernel with native GQA (``native``) or with repeated key/value heads (``repeat``);
- ``fsdp``: the module under FSDP2 with verl's mixed precision (bf16 compute, fp32 reduce) in a 1-rank group
  (default), or ``plain`` (``--fsdp plain`` or ``fsdp,plain``): bf16 parameters, no FSDP;
- ``micro``: update micro-batch sizes (``--micro-batches``, default 16; 0 = the whole batch);
- ``loss``: ``kl`` (the run's loss above) or ``logp`` (``1e-3 * token-mean(log_prob)``: a gradient that is never
  0, so the backward runs even where the reference pass reproduces the update's log-probs exactly, as on CPU).

Usage on the GPU machine (sites of ``benchmarks/gpu/stage.sh``; the 2b model takes ~2.5 min to write, then six
variants)::

    PYTHONPATH=/tmp/site-common:/tmp/site-model:$PWD python -m benchmarks.gpu.vlm_nan_probe --out $OUT

On CPU it runs the same code on the tiny shape in float32 (``--device cpu --shape tiny``), which checks the script.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch


def _batch(processor, prompts: int, response_length: int, seed: int, folder: Path):
    """A rollout-shaped ``DataProto`` of ``prompts`` shapes rows with random full-length responses."""
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
    from verl.utils.dataset.row_reading import write_parquet
    from verl.utils.dataset.shapes import ShapesSpec, make_split
    from verl.workers.rollout.batch import assemble_output

    rows = make_split("train", ShapesSpec(train_size=prompts, test_size=1, image_size=84, seed=seed))
    path = str(folder / "rows.parquet")
    write_parquet(rows, path)
    dataset = RLHFDataset(path, processor.tokenizer, {"max_prompt_length": 384}, processor=processor)
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
    generator = torch.Generator().manual_seed(seed)
    vocab = len(processor.tokenizer)
    responses = torch.randint(0, vocab, (prompts, response_length), generator=generator)
    banned = torch.tensor([processor.image_token_id, processor.tokenizer.convert_tokens_to_ids("<|video_pad|>")])
    responses = torch.where(torch.isin(responses, banned), 0, responses)
    mask = torch.ones(prompts, response_length, dtype=torch.long)
    return assemble_output(batch, 1, responses, mask, torch.zeros(prompts, response_length))


def random_vlm_batch(tmp: str, shape: str, prompts: int, response_length: int, dtype: str = "bfloat16"):
    """``(model folder, processor, batch)``: the random VLM of ``shape`` written under ``tmp`` and a rollout-shaped
    batch of ``prompts`` rows for it (:func:`_batch`, seed 0)."""
    from verl.models.random_vlm import build_random_vlm
    from verl.utils import hf_processor
    from verl.utils.default_model import default_model_path

    model_path = build_random_vlm(f"{tmp}/model", default_model_path(), shape=shape, dtype=dtype)
    processor = hf_processor(model_path)
    return model_path, processor, _batch(processor, prompts, response_length, 0, Path(tmp))


def _micro_log_probs(module, batch, rows, device, calculate_entropy: bool):
    from verl.workers.engine.fsdp.forward import forward_log_probs
    from verl.workers.engine.multimodal_inputs import collate_multi_modal_inputs

    part = batch.select_idxs(rows)
    inputs = collate_multi_modal_inputs(part.non_tensor_batch["multi_modal_inputs"])
    inputs = {k: v.to(device) for k, v in inputs.items()}
    log_probs, entropy = forward_log_probs(
        module,
        part.batch["input_ids"].to(device),
        part.batch["attention_mask"].to(device),
        part.batch["position_ids"].to(device),
        calculate_entropy=calculate_entropy,
        use_remove_padding=True,
        multi_modal_inputs=inputs,
    )
    response_length = part.batch["responses"].shape[1]
    return log_probs[:, -response_length - 1 : -1], entropy


class _Watch:
    """Forward hooks noting the first module with a non-finite output, and tensor hooks on every module output
    noting the modules whose output gradient is non-finite (in the order backward reaches them)."""

    def __init__(self, module: torch.nn.Module):
        self.forward_bad: list[str] = []
        self.backward_bad: list[str] = []
        self.handles = [sub.register_forward_hook(self._hook(name)) for name, sub in module.named_modules() if name]

    def _hook(self, name: str):
        def hook(_module, _inputs, output):
            tensor = output[0] if isinstance(output, tuple) else getattr(output, "last_hidden_state", output)
            if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
                return
            if not self.forward_bad and not bool(torch.isfinite(tensor).all()):
                self.forward_bad.append(name)
            if tensor.requires_grad:
                tensor.register_hook(lambda grad: self._note_grad(name, grad))

        return hook

    def _note_grad(self, name: str, grad: torch.Tensor) -> None:
        if len(self.backward_bad) < 8 and not bool(torch.isfinite(grad).all()):
            self.backward_bad.append(name)

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def _set_gqa(mode: str) -> None:
    from verl.workers.engine.fsdp import attention

    attention._kv_heads_native = None if mode == "native" else False


def probe(args, model_path: str, processor, batch, variant: dict) -> dict:
    """One variant: reference pass, then the update micro-batches' forward + backward; the findings."""
    from transformers import AutoModelForImageTextToText

    from verl.trainer.ppo.algos.aggregation import agg_loss
    from verl.trainer.ppo.algos.kl import kl_penalty
    from verl.workers.engine.fsdp import attention  # noqa: F401 - registers verl_varlen with transformers
    from verl.workers.engine.fsdp.packing import keep_text_boundaries_out_of_encoders

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    dtype = torch.float32 if (variant["fsdp"] == "fsdp" or not cuda) else torch.bfloat16
    module = AutoModelForImageTextToText.from_pretrained(model_path, dtype=dtype, attn_implementation=variant["attn"])
    keep_text_boundaries_out_of_encoders(module.model.visual)
    module.config.use_cache = False
    module.to(device)
    if variant["fsdp"] == "fsdp":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, cast_forward_inputs=True)
        for layer in module.model.language_model.layers:
            fully_shard(layer, mp_policy=policy)
        for block in module.model.visual.blocks:
            fully_shard(block, mp_policy=policy)
        fully_shard(module, mp_policy=policy)
    if variant["attn"] == "verl_varlen":
        _set_gqa(variant["gqa"])
    rows = len(batch)
    with torch.no_grad():
        ref = torch.cat(
            [
                _micro_log_probs(module, batch, list(range(s, min(s + args.ref_micro_batch, rows))), device, False)[0]
                for s in range(0, rows, args.ref_micro_batch)
            ]
        )
    watch = _Watch(module)
    mask = batch.batch["response_mask"].to(device).float()
    tokens = mask.sum()
    losses, finite_log_probs = [], True
    try:
        for start in range(0, rows, variant["micro"]):
            index = list(range(start, min(start + variant["micro"], rows)))
            log_probs, entropy = _micro_log_probs(module, batch, index, device, True)
            finite_log_probs &= bool(torch.isfinite(log_probs).all()) and bool(torch.isfinite(entropy).all())
            if variant["loss"] == "kl":
                kl = kl_penalty(log_probs, ref[index], "low_var_kl")
                loss = args.kl_coef * agg_loss(kl, mask[index], "token-mean", global_num_tokens=tokens)
            else:  # a gradient that is never 0, whatever the reference pass gave
                loss = 1e-3 * agg_loss(log_probs, mask[index], "token-mean", global_num_tokens=tokens)
            loss.backward()
            losses.append(float(loss.detach()))
    finally:
        watch.close()
    grads = [(n, p.grad) for n, p in module.named_parameters() if p.grad is not None]
    grads = [(n, g.full_tensor() if hasattr(g, "full_tensor") else g) for n, g in grads]
    bad = [n for n, g in grads if not bool(torch.isfinite(g).all())]
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for _, g in grads]))
    result = {
        **variant,
        "loss_finite": all(torch.isfinite(torch.tensor(losses)).tolist()),
        "loss_value": sum(losses),
        "log_probs_finite": finite_log_probs,
        "ref_finite": bool(torch.isfinite(ref).all()),
        "grad_norm": float(norm),
        "params_with_nonfinite_grad": len(bad),
        "first_nonfinite_grads": bad[:6],
        "first_nonfinite_forward_output": watch.forward_bad[:1],
        "nonfinite_output_grads_backward_order": watch.backward_bad,
    }
    del module
    if cuda:
        torch.cuda.empty_cache()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "vlm_nan_probe_out"))
    parser.add_argument("--shape", choices=("2b", "tiny"), default="2b")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available")
    parser.add_argument("--prompts", type=int, default=32, help="rows (the GPU run: 32 prompts x 4 samples)")
    parser.add_argument("--response-length", type=int, default=64)
    parser.add_argument("--micro-batches", default="16", help="update micro-batch sizes; 0 = the whole batch")
    parser.add_argument("--losses", default="kl,logp", help="kl (the run's), logp (never-zero gradient)")
    parser.add_argument("--ref-micro-batch", type=int, default=32)
    parser.add_argument("--kl-coef", type=float, default=0.01)
    parser.add_argument("--attn", default="verl_varlen,sdpa")
    parser.add_argument("--fsdp", default="fsdp", help="fsdp (the run's setting), plain (bf16, no FSDP), or both")
    args = parser.parse_args(argv)
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.device == "cuda":
        os.environ.setdefault("VERL_CACHE_DIR", "/tmp/verl_cache")  # where vlm_grpo converts the SmolLM2 GGUF
    if args.device == "cuda" and "fsdp" in args.fsdp.split(","):
        import torch.distributed as dist

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("nccl", rank=0, world_size=1)
        torch.cuda.set_device(0)
    elif "fsdp" in args.fsdp.split(","):
        args.fsdp = "plain"  # FSDP2's mixed precision is a GPU setting here (verl: on_cpu off)
    with tempfile.TemporaryDirectory(prefix="vlm_nan_probe_") as tmp:
        dtype = "bfloat16" if args.device == "cuda" else "float32"
        model_path, processor, batch = random_vlm_batch(tmp, args.shape, args.prompts, args.response_length, dtype)
        results = []
        for fsdp in args.fsdp.split(","):
            for attn in args.attn.split(","):
                for gqa in ("native", "repeat") if attn == "verl_varlen" and args.device == "cuda" else ("native",):
                    for micro in (int(m) or args.prompts for m in args.micro_batches.split(",")):
                        for loss in args.losses.split(","):
                            variant = {"fsdp": fsdp, "attn": attn, "gqa": gqa, "micro": micro, "loss": loss}
                            try:
                                result = probe(args, model_path, processor, batch, variant)
                            except Exception as exc:  # a variant that fails is a finding too; the next one runs
                                result = {**variant, "error": f"{type(exc).__name__}: {exc}"[:2000]}
                            print(json.dumps(result), flush=True)
                            results.append(result)
    (out / "vlm_nan_probe.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
