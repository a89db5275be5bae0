"""Generation engines of the judge, chosen by ``reward_model.rollout.name``: token ids in, judgment texts out.

The interface is one method, :meth:`JudgeEngine.generate`, so that another engine (an async server) can serve
the judge by registering a class with ``@register_judge_engine("name")``.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from verl.utils.registry import Registry

JUDGE_ENGINE_REGISTRY: Registry[type] = Registry(
    "judge engine",
    "reward_model.rollout.name",
    package="verl.workers.reward_model.judge.engines",
    decorator="register_judge_engine",
)


def register_judge_engine(name: str, requires: str | None = None) -> Callable[[type], type]:
    """Class decorator adding a judge engine under ``name``; ``requires`` names the module it imports (its absence
    fails at config validation)."""
    return JUDGE_ENGINE_REGISTRY.register(name, requires=requires)


def get_judge_engine_cls(name: str) -> type:
    """The engine class registered as ``name``; unknown names fail listing the registered ones."""
    return JUDGE_ENGINE_REGISTRY.get(name)


class JudgeEngine(ABC):
    """A loaded judge model. ``rollout_config`` is ``reward_model.rollout`` (lengths, sampling, memory)."""

    def __init__(self, model_path: str, rollout_config: Any, tokenizer: Any, trust_remote_code: bool = False):
        self.model_path = model_path
        self.config = rollout_config
        self.tokenizer = tokenizer
        self.trust_remote_code = trust_remote_code

    @property
    def temperature(self) -> float:
        """Sampling temperature; 0 (greedy) when ``do_sample`` is false."""
        return float(self.config.temperature) if self.config.do_sample else 0.0

    @abstractmethod
    def generate(self, prompt_ids: list[list[int]]) -> list[str]:
        """One judgment per prompt (``response_length`` tokens at most), decoded without special tokens."""


@register_judge_engine("vllm", requires="vllm")
class VLLMJudgeEngine(JudgeEngine):
    """An in-process ``vllm.LLM`` holding the judge's own weights (``load_format`` of ``reward_model.rollout``)."""

    def __init__(self, model_path: str, rollout_config: Any, tokenizer: Any, trust_remote_code: bool = False):
        super().__init__(model_path, rollout_config, tokenizer, trust_remote_code)
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        from transformers import AutoConfig

        from verl.workers.rollout.vllm_rollout.engine_args import build_llm_kwargs, ensure_process_group, start_llm

        hf_config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
        ensure_process_group()
        self.llm = start_llm(build_llm_kwargs(rollout_config, model_path, hf_config, trust_remote_code))

    def generate(self, prompt_ids: list[list[int]]) -> list[str]:
        from vllm import SamplingParams

        config = self.config
        params = SamplingParams(
            n=1,
            temperature=self.temperature,
            top_p=float(config.top_p),
            top_k=int(config.top_k) if int(config.top_k) > 0 else -1,
            max_tokens=int(config.response_length),
        )
        outputs = self.llm.generate([{"prompt_token_ids": ids} for ids in prompt_ids], params, use_tqdm=False)
        return [self.tokenizer.decode(list(o.outputs[0].token_ids), skip_special_tokens=True) for o in outputs]


@register_judge_engine("hf")
class HFJudgeEngine(JudgeEngine):
    """``transformers`` ``generate`` on left-padded prompts, in micro-batches of ``log_prob_micro_batch_size_per_gpu``
    (8 by default)."""

    def __init__(self, model_path: str, rollout_config: Any, tokenizer: Any, trust_remote_code: bool = False):
        super().__init__(model_path, rollout_config, tokenizer, trust_remote_code)
        import torch
        from transformers import AutoModelForCausalLM

        from verl.workers.engine.fsdp.sharding import to_dtype

        dtype = {"auto": torch.float32}.get(rollout_config.dtype) or to_dtype(rollout_config.dtype)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype, trust_remote_code=trust_remote_code)
        self.model.to(device).eval()
        self.device = device

    def generate(self, prompt_ids: list[list[int]]) -> list[str]:
        import torch

        batch_size = int(self.config.log_prob_micro_batch_size_per_gpu or 8)
        pad_id = self.tokenizer.pad_token_id
        texts: list[str] = []
        for start in range(0, len(prompt_ids), batch_size):
            chunk = prompt_ids[start : start + batch_size]
            width = max(len(ids) for ids in chunk)
            input_ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
            attention_mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, ids in enumerate(chunk):
                input_ids[row, width - len(ids) :] = torch.tensor(ids)
                attention_mask[row, width - len(ids) :] = 1
            kwargs: dict[str, Any] = {"max_new_tokens": int(self.config.response_length), "pad_token_id": pad_id}
            kwargs["do_sample"] = self.temperature > 0
            if self.temperature > 0:
                kwargs.update(temperature=self.temperature, top_p=float(self.config.top_p))
            with torch.no_grad():
                output = self.model.generate(
                    input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device), **kwargs
                )
            texts.extend(self.tokenizer.decode(row[width:].tolist(), skip_special_tokens=True) for row in output)
        return texts
