"""``hf`` rollout: batched sampling with the actor's own Hugging Face module (no weight copy at all).

The decode loop is written out here instead of calling ``model.generate`` so that (1) an FSDP2-wrapped module
generates correctly: FSDP2 all-gathers parameters inside every forward, so every rank of the mesh must run the
same number of forwards; ranks agree on stopping with one all-reduce per step; (2) the per-token log-probs are the
ones the sampler drew from; (3) one step is one function of fixed-shape tensors with a static KV cache, which
``torch.compile`` / CUDA graphs can capture later (``engine_kwargs.hf.cache_implementation: static``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from verl.models.transformers.qwen2_vl import padded_model_position_ids
from verl.protocol import DataProto
from verl.workers.engine.multimodal_inputs import collate_multi_modal_inputs
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.batch import assemble_output, check_prompts
from verl.workers.rollout.registry import register_rollout
from verl.workers.rollout.sampling import (
    SamplingSettings,
    resolve_sampling,
    resolve_special_ids,
    vision_placeholder_ids,
)

if TYPE_CHECKING:
    from verl.workers.config.model import ModelSourceConfig
    from verl.workers.config.rollout import RolloutConfig

CACHE_IMPLEMENTATIONS = ("dynamic", "static")


def sample_next_token(
    logits: torch.Tensor, settings: SamplingSettings, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row from ``logits (B, V)``; return ``(tokens (B,), log_probs (B,))``.

    Greedy: ``argmax`` with ``log_softmax(logits)``. Sampling: ``z = logits / T``; top-k keeps the k largest
    ``z``; top-p keeps the smallest prefix of tokens sorted by probability whose mass reaches ``top_p``
    (Holtzman et al. 2020); the token is drawn from and scored by ``log_softmax`` of the kept ``z``
    (vLLM's ``processed_logprobs``).
    """
    logits = logits.float()
    if settings.greedy:
        log_probs = torch.log_softmax(logits, dim=-1)
        tokens = log_probs.argmax(dim=-1)
        return tokens, log_probs.gather(-1, tokens[:, None]).squeeze(-1)
    scaled = logits / settings.temperature
    if 0 < settings.top_k < scaled.shape[-1]:
        kth_largest = torch.topk(scaled, settings.top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth_largest, float("-inf"))
    if settings.top_p < 1.0:
        sorted_z, order = torch.sort(scaled, dim=-1, descending=True)
        sorted_probs = torch.softmax(sorted_z, dim=-1)
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
        drop_sorted = mass_before >= settings.top_p  # never drops the most likely token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        scaled = scaled.masked_fill(drop, float("-inf"))
    log_probs = torch.log_softmax(scaled, dim=-1)
    tokens = torch.multinomial(log_probs.exp(), num_samples=1, generator=generator).squeeze(-1)
    return tokens, log_probs.gather(-1, tokens[:, None]).squeeze(-1)


def _uses_fsdp(module: nn.Module) -> bool:
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # pragma: no cover - torch without FSDP2
        return False
    return any(isinstance(sub, FSDPModule) for sub in module.modules())


def _module_device(module: nn.Module) -> torch.device:
    param = next(module.parameters())
    return param.device


@register_rollout("hf")
class HFRollout(BaseRollout):
    """Generate with ``actor_module`` itself; the sharding manager only switches it to eval mode and back.

    Options under ``engine_kwargs.hf``: ``cache_implementation`` (``dynamic`` (default) or ``static``: a
    preallocated ``(P + R)``-long cache, the shape CUDA graphs need) and ``micro_batch_size`` (rows per
    generation pass, default all ``bs * n`` rows at once).
    """

    def __init__(
        self,
        config: RolloutConfig,
        model_config: ModelSourceConfig,
        tokenizer: Any,
        actor_module: Any = None,
        device_mesh=None,
    ):
        super().__init__(config, model_config, tokenizer, actor_module, device_mesh)
        if actor_module is None:
            raise ValueError("rollout.name=hf generates with the actor's module: pass actor_module")
        self.module: nn.Module = actor_module
        hf_kwargs = dict(config.engine_kwargs.get("hf") or {})
        self.cache_implementation = hf_kwargs.pop("cache_implementation", "dynamic")
        self.micro_batch_size = hf_kwargs.pop("micro_batch_size", None)
        if self.cache_implementation not in CACHE_IMPLEMENTATIONS:
            raise ValueError(
                f"rollout.engine_kwargs.hf.cache_implementation={self.cache_implementation!r}; "
                f"choose one of {CACHE_IMPLEMENTATIONS}"
            )
        if hf_kwargs:
            raise ValueError(f"unknown keys in rollout.engine_kwargs.hf: {sorted(hf_kwargs)}")
        self.sync_steps_across_ranks = _uses_fsdp(actor_module) and dist.is_initialized()
        hf_config = self._hf_config()
        text_config = hf_config.get_text_config()  # the language model's config (itself for text models)
        self.vocab_size = len(tokenizer) if tokenizer is not None else text_config.vocab_size
        self.vocab_size = min(self.vocab_size, text_config.vocab_size)
        self.max_model_len = config.max_model_len or getattr(text_config, "max_position_embeddings", None)
        self.banned_token_ids = vision_placeholder_ids(hf_config)
        """Never sampled: a vision-language model's image/video placeholder ids (``vision_placeholder_ids``; the
        vLLM rollout biases them by -100, here they are masked outright)."""

    def _hf_config(self):
        module = self.module
        if hasattr(module, "get_base_model"):  # peft
            module = module.get_base_model()
        return module.config

    def make_sharding_manager(self, actor_module: Any):
        from verl.workers.sharding_manager.hf import HFShardingManager

        return HFShardingManager(actor_module)

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        generation_eos = getattr(getattr(self.module, "generation_config", None), "eos_token_id", None)
        eos_ids, pad_id = resolve_special_ids(prompts.meta_info, self.tokenizer, generation_eos)
        settings = resolve_sampling(self.config, prompts.meta_info, eos_ids, pad_id)
        check_prompts(prompts, self.config.prompt_length, settings.response_length, self.max_model_len, self.vocab_size)
        device = _module_device(self.module)
        input_ids = prompts.batch["input_ids"].to(device).repeat_interleave(settings.n, dim=0)
        attention_mask = prompts.batch["attention_mask"].to(device).repeat_interleave(settings.n, dim=0)
        position_ids = None
        if "position_ids" in prompts.batch.keys() and prompts.batch["position_ids"].dim() == 3:  # M-RoPE
            position_ids = prompts.batch["position_ids"].to(device).repeat_interleave(settings.n, dim=0)
        media = prompts.non_tensor_batch.get("multi_modal_inputs")
        media = np.repeat(media, settings.n) if media is not None else None
        rows = input_ids.shape[0]
        step = self.micro_batch_size or rows
        parts = []
        for start in range(0, rows, step):
            end = start + step
            inputs = collate_multi_modal_inputs(media[start:end]) if media is not None else None
            parts.append(
                self.generate_tokens(
                    input_ids[start:end],
                    attention_mask[start:end],
                    settings,
                    position_ids=position_ids[start:end] if position_ids is not None else None,
                    multi_modal_inputs={k: v.to(device) for k, v in inputs.items()} if inputs else None,
                )
            )
        responses, response_mask, log_probs = (torch.cat(tensors, dim=0) for tensors in zip(*parts))
        return assemble_output(prompts, settings.n, responses.cpu(), response_mask.cpu(), log_probs.cpu())

    def _new_cache(self, batch_size: int, max_len: int):
        from transformers import DynamicCache, StaticCache

        hf_config = self._hf_config()
        if self.cache_implementation == "static":
            return StaticCache(config=hf_config, max_cache_len=max_len)
        return DynamicCache(config=hf_config)

    def _forward(self, input_ids, attention_mask, position_ids, cache, cache_position, multi_modal_inputs=None):
        output = self.module(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=padded_model_position_ids(position_ids),
            past_key_values=cache,
            cache_position=cache_position,
            use_cache=True,
            logits_to_keep=1,
            **(multi_modal_inputs or {}),
        )
        return output.logits[:, -1, :]

    def _all_ranks_done(self, done: torch.Tensor) -> bool:
        finished = torch.tensor([int(bool(done.all()))], device=done.device)
        if self.sync_steps_across_ranks:
            dist.all_reduce(finished, op=dist.ReduceOp.MIN)
        return bool(finished.item())

    @torch.no_grad()
    def generate_tokens(
        self,
        input_ids: torch.Tensor,
        prompt_mask: torch.Tensor,
        settings: SamplingSettings,
        position_ids: torch.Tensor | None = None,
        multi_modal_inputs: dict | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Decode up to ``R`` tokens for left-padded ``input_ids (B, P)``.

        Vision-language prompts pass their M-RoPE ``position_ids (B, 3, P)`` and the rows' concatenated
        ``multi_modal_inputs`` (used by the prefill only); each decoded token continues at ``last + 1`` in all
        three position rows, as the rollout's output ``position_ids`` record.

        Returns ``responses (B, R)`` right-padded with the pad id, ``response_mask (B, R)`` (1 up to and
        including the first EOS) and ``log_probs (B, R)`` (0 on padding). A row that finished keeps being fed
        (masked) pad tokens until every row of every rank has finished, so all ranks run the same forwards.
        """
        batch_size, prompt_len = input_ids.shape
        response_length = settings.response_length
        device = input_ids.device
        total_len = prompt_len + response_length
        full_mask = torch.zeros(batch_size, total_len, dtype=prompt_mask.dtype, device=device)
        full_mask[:, :prompt_len] = prompt_mask
        if position_ids is None:
            position_ids = torch.clip(prompt_mask.long().cumsum(dim=-1) - 1, min=0)
        positions = position_ids
        eos_ids = torch.tensor(settings.eos_token_ids, device=device)
        stop_at_eos = not self.config.ignore_eos

        responses = torch.full((batch_size, response_length), settings.pad_token_id, dtype=torch.long, device=device)
        log_probs = torch.zeros(batch_size, response_length, dtype=torch.float32, device=device)
        done = torch.zeros(batch_size, dtype=torch.bool, device=device)
        cache = self._new_cache(batch_size, total_len)
        logits = self._forward(
            input_ids,
            full_mask[:, :prompt_len],
            positions,
            cache,
            torch.arange(prompt_len, device=device),
            multi_modal_inputs,
        )
        next_position = positions[..., -1:] + 1
        for step in range(response_length):
            if self.banned_token_ids:
                logits[:, self.banned_token_ids] = float("-inf")
            tokens, token_log_probs = sample_next_token(logits, settings)
            alive = ~done
            tokens = torch.where(alive, tokens, settings.pad_token_id)
            responses[:, step] = tokens
            log_probs[:, step] = torch.where(alive, token_log_probs, 0.0)
            full_mask[:, prompt_len + step] = alive.to(full_mask.dtype)
            if stop_at_eos:
                done = done | torch.isin(tokens, eos_ids)
            if step == response_length - 1 or self._all_ranks_done(done):
                break
            cache_position = torch.tensor([prompt_len + step], device=device)
            logits = self._forward(
                tokens[:, None], full_mask[:, : prompt_len + step + 1], next_position, cache, cache_position
            )
            next_position = next_position + 1
        return responses, full_mask[:, prompt_len:].clone(), log_probs
