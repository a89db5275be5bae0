"""``SpinTrainer``: self-play fine-tuning (Chen et al., arXiv:2401.01335) on the single controller.

One step::

    prompts with SFT targets y -> the current model samples y' (rollout; its rule score is reported)
    -> pairs (y, y') interleaved -> reference log-probs (p_θt, the previous iteration)
    -> actor update on SPIN's loss -> every trainer.ref_update_freq steps: p_θt <- p_θ

Iterations are online (the opponent's samples come from the current model each step, as in verl's recipe) and
the opponent/reference advances every ``ref_update_freq`` steps.
"""

from __future__ import annotations

from typing import Any

import torch

from verl.protocol import DataProto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.trainer.ppo.utils import Role
from verl.utils.profiler import marked_timer
from verl.workers.rollout.batch import assemble_output, right_pad

PAIR_KEYS = ["prompts", "responses", "input_ids", "attention_mask", "position_ids", "response_mask"]


def lookup(row_fields: dict[str, Any], path: str) -> Any:
    """The value at dotted ``path`` in one row's non-tensor fields (``extra_info.answer``)."""
    head, _, rest = path.partition(".")
    if head not in row_fields:
        raise KeyError(f"data.response_key={path!r}: the rows have no field {head!r}; fields: {sorted(row_fields)}")
    value = row_fields[head]
    for key in rest.split(".") if rest else []:
        if not isinstance(value, dict) or key not in value:
            raise KeyError(f"data.response_key={path!r}: no {key!r} in {value!r}")
        value = value[key]
    return value


def interleave_pairs(chosen: DataProto, rejected: DataProto) -> DataProto:
    """``[chosen_0, rejected_0, chosen_1, rejected_1, ...]`` from two batches of equal length."""
    count = len(chosen)
    joined = DataProto.concat([chosen, rejected])
    order = torch.stack([torch.arange(count), torch.arange(count) + count], dim=1).reshape(-1)
    joined.reorder(order)
    return joined


class SpinTrainer(RayPPOTrainer):
    """:class:`RayPPOTrainer` whose step trains on (SFT target, own sample) pairs; the reference is the
    actor worker's own copy, refreshed from the actor."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.use_reference_policy = True  # the loss needs it, whatever the KL settings say
        self.ref_in_actor = True

    def _worker_group_names(self) -> dict:
        return {Role.ActorRolloutRef: ("actor_rollout", None, None)}

    def _target_responses(self, batch: DataProto) -> DataProto:
        """The rows of ``batch`` with the SFT target as the response (tokenized, EOS appended, right-padded)."""
        key = self.config.data.response_key
        columns = batch.non_tensor_batch
        texts = [str(lookup({name: columns[name][i] for name in columns}, key)) for i in range(len(batch))]
        response_length = batch.batch["responses"].shape[1]
        eos = self.tokenizer.eos_token_id
        rows = [
            (self.tokenizer(text, add_special_tokens=False)["input_ids"] + [eos])[:response_length] for text in texts
        ]
        prompt_length = batch.batch["prompts"].shape[1]
        prompts = DataProto.from_dict(
            tensors={
                "input_ids": batch.batch["prompts"],
                "attention_mask": batch.batch["attention_mask"][:, :prompt_length],
                "position_ids": batch.batch["position_ids"][..., :prompt_length],
            },
            non_tensors=dict(batch.non_tensor_batch),
        )
        responses = right_pad(rows, response_length, self.tokenizer.pad_token_id, torch.long)
        response_mask = right_pad([[1] * len(row) for row in rows], response_length, 0, torch.long)
        log_probs = torch.zeros(responses.shape, dtype=torch.float32)
        return assemble_output(prompts, 1, responses, response_mask, log_probs)

    def _preference_pairs(self, generated: DataProto) -> DataProto:
        chosen = self._target_responses(generated).select(batch_keys=PAIR_KEYS)
        rejected = generated.select(batch_keys=PAIR_KEYS)
        pairs = interleave_pairs(chosen, rejected)
        pairs.meta_info["global_token_num"] = pairs.batch["attention_mask"].sum(-1).tolist()
        return pairs

    def _learn(self, batch: DataProto, timing_raw: dict, metrics: dict) -> DataProto:
        """SPIN's update on the pairs built from ``batch`` (the generated samples); returns ``batch`` for the
        step's data metrics, with zero advantages (SPIN has none)."""
        pairs = self._preference_pairs(batch)
        with marked_timer("ref", timing_raw):
            pairs = pairs.union(self.actor_rollout_wg.compute_ref_log_prob(pairs))
        with marked_timer("update_actor", timing_raw):
            metrics.update(self._update_actor(pairs))
        if self.global_steps % int(self.config.trainer.ref_update_freq) == 0:
            with marked_timer("update_ref", timing_raw):
                self.actor_rollout_wg.update_ref_from_actor()
        batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
        batch.batch["advantages"] = torch.zeros_like(batch.batch["token_level_scores"])
        batch.batch["returns"] = torch.zeros_like(batch.batch["token_level_scores"])
        return batch

    def _load_checkpoint(self) -> int:
        """Resume the actor, then start the next iteration from it (the reference is the resumed actor)."""
        step = super()._load_checkpoint()
        if step > 0:
            self.actor_rollout_wg.update_ref_from_actor()
        return step
