"""Dumping generations to jsonl (``trainer.rollout_data_dir``, ``trainer.validation_data_dir``), as verl does.

One file per step, ``{dump_dir}/{step}.jsonl``, one line per sample:
``{"input": prompt text, "output": response text, "score": float, "step": int, **per-sample reward extra info}``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

__all__ = ["dump_generations", "dump_batch_generations"]


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def dump_generations(
    inputs: list[str],
    outputs: list[str],
    scores: list[float],
    extra_infos: dict[str, list[Any]],
    step: int,
    dump_dir: str,
) -> str:
    """Write ``{dump_dir}/{step}.jsonl``; extra-info lists whose length differs from ``inputs`` are skipped."""
    os.makedirs(dump_dir, exist_ok=True)
    path = os.path.join(dump_dir, f"{step}.jsonl")
    extras = {key: values for key, values in extra_infos.items() if len(values) == len(inputs)}
    with open(path, "w", encoding="utf-8") as handle:
        for i, (prompt, response, score) in enumerate(zip(inputs, outputs, scores)):
            record = {"input": prompt, "output": response, "score": float(score), "step": step}
            record.update({key: _plain(values[i]) for key, values in extras.items()})
            handle.write(json.dumps(record, default=str) + "\n")
    return path


def dump_batch_generations(batch, tokenizer, step: int, dump_dir: str) -> str:
    """Decode a scored training batch (``prompts``, ``responses``, ``token_level_scores``) and dump it."""
    inputs = tokenizer.batch_decode(batch.batch["prompts"], skip_special_tokens=True)
    outputs = tokenizer.batch_decode(batch.batch["responses"], skip_special_tokens=True)
    scores = batch.batch["token_level_scores"].sum(-1).tolist()
    extra_keys = [k for k in ("acc", "format", "pred") if k in batch.non_tensor_batch]
    extras = {key: list(batch.non_tensor_batch[key]) for key in extra_keys}
    return dump_generations(inputs, outputs, scores, extras, step, dump_dir)
