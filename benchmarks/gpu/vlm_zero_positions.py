"""Which packed positions of the random Qwen2-VL-2B micro-batch carry a (near-)zero hidden state into its decoder
layers (issue 21), forward only.

Session 10's ``vlm_nan_locate --micro 4`` showed the output gradient of every decoder layer growing ~200x per layer
from the top, on the GPU and on its host's CPU alike, through attention and ``input_layernorm``. RMSNorm's backward
scales by ``1 / rms(x)``: at a position whose hidden state is exactly zero that is ``1 / sqrt(eps)`` (1000 for eps
1e-6) in every layer. This prints, per decoder layer, the smallest per-position RMS of the layer's input and where it
is (packed index, token id, image or text, position within its row), and the positions whose embedding-layer RMS is
below ``--threshold``. ``--backward`` then runs the micro-batch's loss backward (``vlm_nan_locate``'s) and prints the
max |gradient| of each decoder layer's output and the number of parameters with a non-finite gradient.

    PYTHONPATH=/tmp/site-common:/tmp/site-model:$PWD python -m benchmarks.gpu.vlm_zero_positions [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import tempfile

import torch

from benchmarks.gpu.vlm_nan_locate import _load, _loss, _nonfinite_params, _Recorder
from benchmarks.gpu.vlm_nan_probe import _micro_log_probs, random_vlm_batch


def layer_input_rms(layers: torch.nn.ModuleList, compute) -> list[torch.Tensor]:
    """``(T,)`` RMS of each of ``layers``' input hidden state per (packed) position, in layer order, from one
    ``compute()`` forward."""
    found: list[torch.Tensor] = []

    def hook(_layer, args, kwargs):
        hidden = args[0] if args else kwargs["hidden_states"]
        found.append(hidden.detach().float().reshape(-1, hidden.shape[-1]).pow(2).mean(-1).sqrt().cpu())

    handles = [layer.register_forward_pre_hook(hook, with_kwargs=True) for layer in layers]
    try:
        with torch.no_grad():
            compute()
    finally:
        for handle in handles:
            handle.remove()
    return found


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=("2b", "tiny"), default="2b")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--attn", default="sdpa")
    parser.add_argument("--micro", type=int, default=4)
    parser.add_argument("--threshold", type=float, default=1e-3)
    parser.add_argument("--dtype", default="bfloat16", help="weights' dtype (float32 is far faster on a CPU)")
    parser.add_argument("--backward", action="store_true", help="also the loss's backward: per-layer gradient maxima")
    args = parser.parse_args(argv)
    rows_out: list[dict] = []

    def emit(record: dict) -> None:
        print(json.dumps(record), flush=True)
        rows_out.append(record)

    with tempfile.TemporaryDirectory(prefix="vlm_zero_positions_") as tmp:
        model_path, processor, batch = random_vlm_batch(tmp, args.shape, 32, 64)
        rows = list(range(args.micro))
        part = batch.select_idxs(rows)
        mask = part.batch["attention_mask"].bool()
        ids = part.batch["input_ids"][mask]  # packed order: the rows' valid tokens, row after row
        row_of = torch.arange(len(rows))[:, None].expand_as(mask)[mask]
        pos_in_row = (mask.long().cumsum(-1) - 1)[mask]
        image = ids == processor.image_token_id
        device = torch.device(args.device)
        module = _load(model_path, getattr(torch, args.dtype), args.attn, device)
        per_layer = layer_input_rms(
            module.model.language_model.layers, lambda: _micro_log_probs(module, batch, rows, device, False)
        )
        emit({"tokens": int(ids.numel()), "image_tokens": int(image.sum()), "device": args.device})

        def where(index: int) -> dict:
            return {"packed": index, "token": int(ids[index]), "image": bool(image[index]),
                    "row": int(row_of[index]), "pos_in_row": int(pos_in_row[index])}  # fmt: skip

        for layer, rms in enumerate(per_layer):
            if rms.numel() != ids.numel():
                emit({"layer": layer, "error": f"{rms.numel()} positions vs {ids.numel()} packed tokens"})
                continue
            index = int(rms.argmin())
            emit({"layer": layer, "min_rms": float(rms.min()), "median_rms": float(rms.median()), **where(index)})
        small = torch.nonzero(per_layer[0] < args.threshold).flatten().tolist() if per_layer else []
        emit({"embedding_rms_below": args.threshold, "positions": [where(i) for i in small[:20]], "count": len(small)})
        if args.backward:
            recorder = _Recorder(module)
            loss = _loss(module, batch, rows, device)
            loss.backward()
            recorder.close()
            layers = {k: v for k, v in recorder.grad_max.items() if k.count(".") == 3}  # whole decoder layers
            emit({"loss": float(loss.detach()), "params_with_nonfinite_grad": len(_nonfinite_params(module)),
                  "layer_output_grad_max": layers})  # fmt: skip
    return rows_out


if __name__ == "__main__":
    main()
