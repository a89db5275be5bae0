"""Async vs sync rollout throughput: the same vLLM engine, as one batch and as concurrent single requests.

``sync`` is ``vLLMRollout.generate_sequences`` on the whole batch (what ``rollout.mode=sync`` runs); ``async`` sends
every prompt as its own request to ``AsyncvLLMServer`` from as many threads (what agent loops do in
``rollout.mode=async``). EOS is ignored so both generate every token; both run on the same weights in the same
process. Prints tokens/s of each and the ratio async / sync (1.0 means the request path costs nothing).

Usage: ``python -m benchmarks.bench_async_rollout [--prompts 32] [--response-length 128] [--dtype float32]``
(on a GPU machine the actor goes to the GPU and ``--dtype bfloat16`` is the usual choice).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _served(server, manager, prompt_ids: list[list[int]], response_length: int) -> tuple[float, int]:
    """Seconds and tokens for every prompt sent at once as a single request."""
    request = {"temperature": 1.0, "max_tokens": response_length, "logprobs": False}
    with manager:
        server.start()
        try:
            start = time.perf_counter()
            with ThreadPoolExecutor(len(prompt_ids)) as pool:
                outputs = list(pool.map(lambda ids: server.generate(ids, request, "bench"), prompt_ids))
            seconds = time.perf_counter() - start
        finally:
            server.stop()
    return seconds, sum(len(output.token_ids) for output in outputs)


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--response-length", type=int, default=128)
    parser.add_argument("--prompt-length", type=int, default=96)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args([] if argv is None else argv)

    import torch
    from transformers import AutoModelForCausalLM

    from benchmarks.bench_rollout import _prompts, _timed_generation
    from verl.utils.default_model import default_model_path
    from verl.utils.tokenizer import hf_tokenizer
    from verl.workers.config.model import HFModelConfig
    from verl.workers.config.rollout import RolloutConfig
    from verl.workers.rollout import build_rollout
    from verl.workers.rollout.async_server import get_async_server_class

    path = default_model_path()
    tokenizer = hf_tokenizer(path)  # a pad token (the EOS) where the model has none, as the trainer does
    actor = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, args.dtype))
    if torch.cuda.is_available():
        actor = actor.cuda()
    prompts = _prompts(tokenizer, args.prompts, args.prompt_length)
    mask = prompts.batch["attention_mask"].bool()
    prompt_ids = [row[row_mask].tolist() for row, row_mask in zip(prompts.batch["input_ids"], mask)]
    config = RolloutConfig(
        name="vllm",
        mode="async",
        prompt_length=args.prompt_length,
        response_length=args.response_length,
        dtype=args.dtype,
        n=1,
        ignore_eos=True,
        max_num_seqs=args.prompts,
        max_model_len=args.prompt_length + args.response_length,
        gpu_memory_utilization=0.1 if not torch.cuda.is_available() else 0.3,
    )
    rollout, manager = build_rollout(config, HFModelConfig(path=path), tokenizer, actor)
    server = get_async_server_class("vllm")(rollout)
    warm_up = _prompts(tokenizer, 2, args.prompt_length)
    warm_up.meta_info["response_length"] = 8
    _timed_generation(rollout, manager, warm_up)  # first weight sync and first forward
    _served(server, manager, prompt_ids[:2], 8)

    results: dict[str, float] = {}
    seconds, tokens, _ = _timed_generation(rollout, manager, prompts)
    results["sync_tokens_per_s"] = tokens / seconds
    print(f"sync:  {tokens} tokens in {seconds:.2f} s = {tokens / seconds:.1f} tokens/s (one batch)", flush=True)
    seconds, tokens = _served(server, manager, prompt_ids, args.response_length)
    results["async_tokens_per_s"] = tokens / seconds
    print(f"async: {tokens} tokens in {seconds:.2f} s = {tokens / seconds:.1f} tokens/s ({len(prompt_ids)} requests)")
    results["async_over_sync"] = results["async_tokens_per_s"] / results["sync_tokens_per_s"]
    print(f"async / sync throughput ratio: {results['async_over_sync']:.2f}x", flush=True)
    rollout.shutdown()
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
