"""Which operation makes the bf16 backward of the random Qwen2-VL-2B non-finite on CUDA only (issue 21), in one
GPU call.

What is known (``vlm_nan_probe``, session 6): on the GPU every forward output is finite, yet the backward's first
non-finite output gradient appears in a middle decoder layer (``layers.6`` with the ``logp`` loss, ``layers.3`` /
``layers.4`` with the KL loss, whatever the attention kernel or FSDP). The same micro-batch of the same model in
bf16 on CPU (``vlm_nan_probe``'s code with bf16 weights, sdpa and verl_varlen, both losses) gives finite gradients
(grad norm 0.0107 / 0.0030), hidden states of at most |20| in every layer (image and text positions alike), and the
vision features' RMS is 1.4: nothing overflows. So this script compares the devices directly:

1. the first update micro-batch of ``vlm_nan_probe``'s batch (16 rows, 1792 packed tokens, 144 image tokens) runs
   forward on CUDA and on this machine's CPU, both bf16 with the same weights; per recorded module (vision merger,
   embedding, every decoder layer and its norms / attention / MLP, the final norm), the max |output| on each device
   (image and text positions apart) and the largest CUDA-CPU difference relative to the CPU output's max: the first
   module whose CUDA output departs from the CPU one is where CUDA computes something else;
2. the backward of ``1e-3 * token-mean(log_prob)`` on CUDA under ``torch.autograd.detect_anomaly``: the autograd
   function that first returns a non-finite gradient and the forward line that made it; per recorded
   language-model module the max |output gradient| on both devices (CPU: a plain backward), in backward order. A
   gradient that grows layer after layer on CUDA until a float32 reduction overflows (then ``inf - inf`` in the
   attention's ``dP - rowsum(dO * O)`` or ``0 * inf`` in RMSNorm's backward) shows as a rising CUDA profile: the
   KL loss, whose gradient is far smaller, failing deeper (layer 3/4) than ``logp`` (layer 6) points that way;
3. CUDA variants, each one line: fp32 weights (is it bf16 arithmetic?), and bf16 with
   ``torch.utils.deterministic.fill_uninitialized_memory`` (are uninitialised buffers read?).

Usage on the GPU machine (``benchmarks/gpu/stage.sh``'s sites)::

    PYTHONPATH=/tmp/site-common:/tmp/site-model:$PWD python -m benchmarks.gpu.vlm_nan_locate --out $OUT

``--device cpu --shape tiny`` runs the same code with the CPU on both sides (a check of the script).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
import warnings
from functools import partial
from pathlib import Path

import torch

from benchmarks.gpu.vlm_nan_probe import _micro_log_probs, random_vlm_batch

RECORDED = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")
"""Submodules of each decoder layer whose outputs are compared."""


def _recorded(name: str) -> bool:
    if name in ("model.visual.merger", "model.language_model.embed_tokens", "model.language_model.norm"):
        return True
    parts = name.split(".")
    if parts[:3] != ["model", "language_model", "layers"]:
        return False
    return len(parts) == 4 or (len(parts) == 5 and parts[4] in RECORDED)


def _load(model_path: str, dtype: torch.dtype, attn: str, device: torch.device):
    from transformers import AutoModelForImageTextToText

    from verl.workers.engine.fsdp import attention  # noqa: F401 - registers verl_varlen with transformers
    from verl.workers.engine.fsdp.packing import keep_text_boundaries_out_of_encoders

    module = AutoModelForImageTextToText.from_pretrained(model_path, dtype=dtype, attn_implementation=attn)
    keep_text_boundaries_out_of_encoders(module.model.visual)
    module.config.use_cache = False
    return module.to(device)


class _Recorder:
    """Forward hooks keeping each recorded module's output (bf16, on the host) and tensor hooks keeping the max
    |gradient| w.r.t. each recorded language-model module's output, in the order backward reaches them."""

    def __init__(self, module: torch.nn.Module):
        self.outputs: dict[str, torch.Tensor] = {}
        self.grad_max: dict[str, float] = {}
        self.handles = [
            sub.register_forward_hook(self._hook(name)) for name, sub in module.named_modules() if _recorded(name)
        ]

    def _hook(self, name: str):
        def hook(_module, _inputs, output):
            tensor = output[0] if isinstance(output, tuple) else output
            if not isinstance(tensor, torch.Tensor):
                return
            self.outputs[name] = tensor.detach().to("cpu", torch.bfloat16).reshape(-1, tensor.shape[-1])
            if tensor.requires_grad and name.startswith("model.language_model."):
                tensor.register_hook(lambda grad: self.grad_max.__setitem__(name, float(grad.float().abs().max())))

        return hook

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def _loss(module, batch, rows, device):
    log_probs, _ = _micro_log_probs(module, batch, rows, device, True)
    mask = batch.batch["response_mask"][rows].to(device).float()
    return 1e-3 * (log_probs.float() * mask).sum() / mask.sum()


def _nonfinite_params(module) -> list[str]:
    return [n for n, p in module.named_parameters() if p.grad is not None and not bool(torch.isfinite(p.grad).all())]


def compare_forward(cuda_out: dict, cpu_out: dict, image: torch.Tensor) -> list[dict]:
    """Per module (forward order): max |output| on both devices (text / image positions of the language model
    apart) and ``max|cuda - cpu| / max|cpu|``."""
    rows = []
    for name, ref in cpu_out.items():
        got = cuda_out.get(name)
        if got is None or got.shape != ref.shape:
            rows.append({"module": name, "error": f"shapes {None if got is None else tuple(got.shape)} vs {ref.shape}"})
            continue
        a, b = got.float(), ref.float()
        scale = float(b.abs().max()) or 1e-30
        row = {
            "module": name,
            "cuda_max": float(a.abs().max()),
            "cpu_max": float(b.abs().max()),
            "cuda_finite": bool(torch.isfinite(a).all()),
            "rel_diff": float((a - b).abs().max()) / scale,
        }
        if a.shape[0] == image.numel() and bool(image.any()):
            row["cuda_image_max"] = float(a[image].abs().max())
            row["cuda_text_max"] = float(a[~image].abs().max())
        rows.append(row)
    return rows


def anomaly_forward_backward(compute_loss) -> dict:
    """``compute_loss()`` and its backward under anomaly detection: the first autograd function returning a
    non-finite value, and the forward traceback PyTorch records for it (the forward must run in the mode)."""
    with warnings.catch_warnings(record=True) as caught, torch.autograd.detect_anomaly(check_nan=True):
        warnings.simplefilter("always")
        loss = compute_loss()
        try:
            loss.backward()
            error = None
        except RuntimeError as exc:
            error = str(exc)[:2000]
    forward_trace = [str(w.message)[-4000:] for w in caught if "Traceback of forward call" in str(w.message)]
    return {"loss": float(loss.detach()), "anomaly_error": error, "forward_traceback": forward_trace[:1]}


def variant(args, model_path, batch, rows, name: str, dtype: torch.dtype) -> dict:
    """One CUDA forward + backward of the micro-batch: whether the gradients are finite."""
    device = torch.device(args.device)
    fill = name == "fill_uninitialized"
    if fill:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        module = _load(model_path, dtype, args.attn, device)
        loss = _loss(module, batch, rows, device)
        loss.backward()
        bad = _nonfinite_params(module)
        return {"variant": name, "loss": float(loss.detach()), "params_with_nonfinite_grad": len(bad), "first": bad[:3]}
    except Exception as exc:  # a variant that fails is a finding too
        return {"variant": name, "error": f"{type(exc).__name__}: {exc}"[:2000]}
    finally:
        if fill:
            torch.use_deterministic_algorithms(False)
        if device.type == "cuda":
            torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "vlm_nan_locate_out"))
    parser.add_argument("--shape", choices=("2b", "tiny"), default="2b")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available")
    parser.add_argument("--attn", default="sdpa", help="attention of both devices (sdpa or verl_varlen)")
    parser.add_argument("--prompts", type=int, default=32, help="rows of the batch (vlm_nan_probe's)")
    parser.add_argument("--micro", type=int, default=16, help="rows of the compared micro-batch (the first ones)")
    parser.add_argument("--response-length", type=int, default=64)
    parser.add_argument("--cpu-threads", type=int, default=0, help="0: torch's default")
    args = parser.parse_args(argv)
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.cpu_threads:
        torch.set_num_threads(args.cpu_threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.device == "cuda":
        os.environ.setdefault("VERL_CACHE_DIR", "/tmp/verl_cache")
    records: list[dict] = []

    def emit(record: dict) -> None:
        print(json.dumps(record), flush=True)
        records.append(record)

    with tempfile.TemporaryDirectory(prefix="vlm_nan_locate_") as tmp:
        model_path, processor, batch = random_vlm_batch(tmp, args.shape, args.prompts, args.response_length)
        rows = list(range(args.micro))
        part = batch.select_idxs(rows)
        image = (part.batch["input_ids"] == processor.image_token_id)[part.batch["attention_mask"].bool()]
        emit({"tokens": int(image.numel()), "image_tokens": int(image.sum()), "device": args.device})

        sides = {}
        for side, device in (("cpu", torch.device("cpu")), ("cuda", torch.device(args.device))):
            module = _load(model_path, torch.bfloat16, args.attn, device)
            recorder = _Recorder(module)
            result = {"side": side}
            if side == "cuda":
                result.update(anomaly_forward_backward(partial(_loss, module, batch, rows, device)))
            else:
                loss = _loss(module, batch, rows, device)
                loss.backward()
                result["loss"] = float(loss.detach())
            recorder.close()
            bad = _nonfinite_params(module)
            result.update({"params_with_nonfinite_grad": len(bad), "first": bad[:3]})
            result["layer_grad_max"] = recorder.grad_max
            emit(result)
            sides[side] = recorder.outputs
            del module
        rows_cmp = compare_forward(sides["cuda"], sides["cpu"], image)
        first = next((r for r in rows_cmp if r.get("error") or r["rel_diff"] > 0.05), None)
        emit({"first_departing_module": first})
        for row in rows_cmp:
            emit(row)
        del sides
        if args.device == "cuda":
            emit(variant(args, model_path, batch, rows, "fp32_weights", torch.float32))
            emit(variant(args, model_path, batch, rows, "fill_uninitialized", torch.bfloat16))
    (out / "vlm_nan_locate.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        sys.exit(1)
