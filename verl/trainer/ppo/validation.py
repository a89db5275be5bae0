"""Validation: generate ``rollout.val_kwargs.n`` responses per validation prompt, score them and summarise.

Logged as ``val-core/{data_source}/reward/mean@N`` (plus best@k / maj@k with bootstrap when N > 1, see
``metric_utils.process_validation_metrics``) and ``val-aux/...`` for the remaining statistics.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from verl.protocol import DataProto, pad_dataproto_to_divisor, unpad_dataproto
from verl.trainer.ppo.generation_dump import dump_generations
from verl.trainer.ppo.metric_utils import process_validation_metrics, validation_metrics_to_log
from verl.trainer.ppo.reward import compute_reward

__all__ = ["run_validation", "split_generation_inputs"]

GENERATION_TENSOR_KEYS = ("input_ids", "attention_mask", "position_ids")
REWARD_NON_TENSOR_KEYS = ("data_source", "reward_model", "extra_info", "uid")
SHARED_NON_TENSOR_KEYS = ("raw_prompt",)
"""Non-tensors both sides read: the rollout (chat messages) and the reward model / judge (re-rendering the chat)."""


def split_generation_inputs(batch: DataProto) -> DataProto:
    """Pop what the rollout consumes (prompt tensors and prompt-side non-tensors) out of ``batch``.

    The reward-side non-tensors (``data_source``, ``reward_model``, ``extra_info``, ``uid``) stay in ``batch``,
    ``raw_prompt`` goes to both, and the rollout's output is unioned back into ``batch``.
    """
    non_tensor_keys = [key for key in batch.non_tensor_batch if key not in REWARD_NON_TENSOR_KEYS]
    tensor_keys = [key for key in GENERATION_TENSOR_KEYS if key in batch.batch.keys()]
    shared = {key: batch.non_tensor_batch[key] for key in SHARED_NON_TENSOR_KEYS if key in batch.non_tensor_batch}
    gen_batch = batch.pop(batch_keys=tensor_keys, non_tensor_batch_keys=non_tensor_keys)
    batch.non_tensor_batch.update(shared)
    return gen_batch


def _generation_meta(rollout_config: Any, tokenizer) -> dict[str, Any]:
    val_kwargs = rollout_config.val_kwargs
    return {
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "recompute_log_prob": False,
        "do_sample": bool(val_kwargs.do_sample),
        "temperature": float(val_kwargs.temperature),
        "top_p": float(val_kwargs.top_p),
        "top_k": int(val_kwargs.top_k),
        "validate": True,
        "n": 1,
    }


def run_validation(
    val_dataloader,
    actor_rollout_wg,
    val_reward_fn,
    tokenizer,
    rollout_config: Any,
    num_generations_to_print: int = 0,
    dump_dir: str | None = None,
    step: int = 0,
    add_model_scores: Callable[[DataProto], DataProto] | None = None,
) -> dict[str, float]:
    """Generate, score and summarise the whole validation set; returns the flattened metric dict.

    With ``dump_dir`` (``trainer.validation_data_dir``) every generation is also written to ``{dump_dir}/{step}.jsonl``.
    ``add_model_scores`` adds the reward model's ``rm_scores`` to a generated batch before the reward function.
    """
    n = int(rollout_config.val_kwargs.n)
    sample_inputs: list[str] = []
    data_sources: list[str] = []
    extra_infos: dict[str, list[Any]] = defaultdict(list)
    printed: list[tuple[str, str, float]] = []
    responses: list[str] = []

    for batch_dict in val_dataloader:
        batch = DataProto.from_single_dict(batch_dict)
        batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(batch))], dtype=object)
        batch = batch.repeat(repeat_times=n, interleave=True)
        prompts_text = tokenizer.batch_decode(batch.batch["input_ids"], skip_special_tokens=True)

        gen_batch = split_generation_inputs(batch)
        gen_batch.meta_info = _generation_meta(rollout_config, tokenizer)
        gen_batch, pad_size = pad_dataproto_to_divisor(gen_batch, actor_rollout_wg.world_size)
        output = unpad_dataproto(actor_rollout_wg.generate_sequences(gen_batch), pad_size)
        batch = batch.union(output)
        if add_model_scores is not None:
            batch = add_model_scores(batch)

        scores, extra = compute_reward(batch, val_reward_fn)
        sequence_scores = scores.sum(-1).tolist()
        extra_infos["reward"].extend(sequence_scores)
        for key, values in extra.items():
            if len(values) == len(sequence_scores):
                extra_infos[key].extend(values)
        sample_inputs.extend(prompts_text)
        data_sources.extend(batch.non_tensor_batch.get("data_source", np.array(["unknown"] * len(batch))).tolist())
        if len(printed) < num_generations_to_print or dump_dir:
            responses_text = tokenizer.batch_decode(batch.batch["responses"], skip_special_tokens=True)
            printed.extend(zip(prompts_text, responses_text, sequence_scores))
            responses.extend(responses_text)

    for prompt, response, score in printed[:num_generations_to_print]:
        print(f"[validation] score={score:.3f}\n  prompt: {prompt!r}\n  response: {response!r}")

    infos = {key: values for key, values in extra_infos.items() if len(values) == len(sample_inputs)}
    if dump_dir:
        dump_generations(sample_inputs, responses, infos["reward"], infos, step, dump_dir)
    return validation_metrics_to_log(process_validation_metrics(data_sources, sample_inputs, infos))
