"""Vision-language test inputs: prompt batches of the built-in shapes task through the real dataset, and an
independent log-prob reference computed by plain transformers one sample at a time."""

from __future__ import annotations

import numpy as np
import torch

from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.utils.dataset.row_reading import write_parquet
from verl.utils.dataset.shapes import ShapesSpec, make_split


def shapes_rows(count: int, image_size: int = 84, seed: int = 7) -> list[dict]:
    """``count`` rows of the shapes task (84-pixel images: 9 image tokens each)."""
    spec = ShapesSpec(train_size=count, test_size=1, image_size=image_size, seed=seed)
    return make_split("train", spec)


def vision_prompts(processor, rows: list[dict], tmp_path, max_prompt_length: int = 64) -> DataProto:
    """A left-padded prompt batch built by ``RLHFDataset`` from ``rows`` (written to a parquet file)."""
    path = str(tmp_path / "vision_rows.parquet")
    write_parquet(rows, path)
    dataset = RLHFDataset(path, processor.tokenizer, {"max_prompt_length": max_prompt_length}, processor=processor)
    return DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))


def with_responses(prompts: DataProto, response_length: int, vocab: int, seed: int = 0) -> DataProto:
    """``prompts`` joined with random right-padded responses of lengths 1..R, laid out like a rollout batch
    (``position_ids`` continue at ``last + 1`` in all M-RoPE rows)."""
    from verl.workers.rollout.batch import assemble_output

    generator = torch.Generator().manual_seed(seed)
    rows = len(prompts)
    responses = torch.randint(0, vocab, (rows, response_length), generator=generator)
    lengths = torch.randint(1, response_length + 1, (rows,), generator=generator)
    mask = (torch.arange(response_length)[None, :] < lengths[:, None]).long()
    responses = torch.where(mask.bool(), responses, 0)
    return assemble_output(prompts, 1, responses, mask, torch.zeros(rows, response_length))


@torch.no_grad()
def reference_log_probs(model, batch: DataProto, image_token_id: int, temperature: float = 1.0) -> torch.Tensor:
    """``(bs, R)`` log-probs of each row's response under plain transformers, in float64, one sample at a time with
    no padding: the model computes its own M-RoPE ids from ``mm_token_type_ids`` (0 outside the response)."""
    model = model.double()
    response_length = batch.batch["responses"].shape[1]
    out = torch.zeros(len(batch), response_length, dtype=torch.float64)
    media = batch.non_tensor_batch.get("multi_modal_inputs", np.array([{}] * len(batch), dtype=object))
    for row in range(len(batch)):
        mask = batch.batch["attention_mask"][row].bool()
        ids = batch.batch["input_ids"][row][mask][None]
        inputs = {k: (v.double() if v.is_floating_point() else v) for k, v in dict(media[row] or {}).items()}
        token_types = (ids == image_token_id).long()
        logits = model(input_ids=ids, mm_token_type_ids=token_types, **inputs).logits[0].double() / temperature
        log_probs = torch.log_softmax(logits, dim=-1)
        n = int(batch.batch["response_mask"][row].sum())
        tokens = ids[0, -n:]
        out[row, :n] = log_probs[-n - 1 : -1].gather(-1, tokens[:, None])[:, 0]
    return out
