"""The reward-model role: a frozen scorer on the training engine of ``reward_model.strategy`` (FSDP2 or Megatron),
usable alone (``RewardModelWorker`` holds it).

``compute_rm_score`` turns a policy batch into ``rm_scores (bs, R)``: the reward model's score of each
(prompt, response) at the last valid response token, zero elsewhere (verl's ``rm_scores``). The inputs (the
policy's tokens or the re-rendered chat) and the placement are the same for every engine; the scorer
(:mod:`verl.workers.reward_model.base`) is the engine's.
"""

from __future__ import annotations

import torch

from verl.protocol import DataProto
from verl.workers.config.reward_model import RewardModelConfig
from verl.workers.engine.micro_batches import all_reduce_sum
from verl.workers.reward_model.base import build_reward_scorer
from verl.workers.reward_model.inputs import place_at_last_response_token, policy_token_inputs, rerendered_inputs


def load_tokenizer(path: str, trust_remote_code: bool):
    """A tokenizer with a pad token (the eos token when it has none)."""
    from transformers import AutoTokenizer

    from verl.workers.config.model import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(path), trust_remote_code=trust_remote_code)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def import_external_lib(name: str | None) -> None:
    """Import ``reward_model.model.external_lib`` so that it registers its Hugging Face classes."""
    if name:
        import importlib

        importlib.import_module(name)


class RewardModelRole:
    """``config`` is the ``reward_model`` section."""

    def __init__(self, config: RewardModelConfig):
        model_config = config.model
        trust = bool(model_config.trust_remote_code)
        import_external_lib(model_config.external_lib)
        self.config = config
        self.scorer = build_reward_scorer(config)
        self.reward_tokenizer = load_tokenizer(model_config.path, trust)
        input_tokenizer = model_config.input_tokenizer
        self.input_tokenizer = load_tokenizer(input_tokenizer, trust) if input_tokenizer else None
        if self.input_tokenizer is not None and not getattr(self.reward_tokenizer, "chat_template", None):
            raise ValueError(
                f"reward_model.model.input_tokenizer={input_tokenizer!r} asks to re-render each chat with the reward "
                f"model's chat template, but the tokenizer at reward_model.model.path={model_config.path!r} has none; "
                "set reward_model.model.input_tokenizer=null (same vocabulary) or give the reward model a chat template"
            )

    def _max_length(self, data: DataProto) -> int:
        """``max_length``, else the policy's sequence length; never above the dynamic micro-batch budget."""
        length = self.config.max_length or int(data.batch["attention_mask"].shape[-1])
        if self.config.use_dynamic_bsz:
            length = min(length, int(self.config.forward_max_token_len_per_gpu))
        return int(length)

    def compute_rm_score(self, data: DataProto) -> DataProto:
        """``rm_scores (bs, R)`` and ``meta_info["metrics"]`` (``reward/model/truncated``: re-rendered rows cut, summed
        over the data-parallel ranks, so every rank must call it)."""
        if self.input_tokenizer is None:
            inputs = policy_token_inputs(data)
        else:
            inputs = rerendered_inputs(data, self.input_tokenizer, self.reward_tokenizer, self._max_length(data))
        scores = self.scorer.compute_scores(inputs)
        response_length = data.batch["responses"].shape[-1]
        response_mask = data.batch["attention_mask"][:, -response_length:]
        rm_scores = place_at_last_response_token(scores, response_mask.cpu())
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return DataProto.from_dict(
            tensors={"rm_scores": rm_scores},
            meta_info={
                "metrics": {"reward/model/truncated": all_reduce_sum(inputs.num_truncated, self.scorer.dp_group)}
            },
        )
