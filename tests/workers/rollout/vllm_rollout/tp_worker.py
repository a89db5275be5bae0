"""One rank of the tensor-parallel tests (launched by torchrun from test_vllm_tensor_parallel.py and
tests/workers/rollout/test_tensor_parallel_gpu.py).

Usage: ``torchrun --nproc-per-node N -m tests.workers.rollout.vllm_rollout.tp_worker MODEL_DIR OUT_DIR [ENGINE]``
(or one process per rank with ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/``MASTER_PORT`` set)
(ENGINE: ``vllm`` (default) or ``sglang``; on a GPU machine each rank takes GPU ``LOCAL_RANK`` and the engine
runs in bf16). The prompts are split evenly over the ranks; the TP group gathers them, generates greedily, and
each rank keeps its share.
Then (vllm) the same engine serves single requests (``rollout.mode=async``): rank 0 sends every prompt
at once, the other ranks step in lockstep with it.
"""

import faulthandler
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.distributed as dist

from tests.workers.rollout.helpers import (
    PROMPTS,
    load_model,
    load_tokenizer,
    make_prompts,
    model_config,
    rollout_config,
)
from verl.workers.rollout import build_rollout
from verl.workers.rollout.async_server import get_async_server_class


def serve_single_requests(rollout, manager, tokenizer) -> list[list[int]]:
    """Greedy outputs of every prompt sent at once to the async server (only the TP leader takes requests)."""
    server = get_async_server_class("vllm")(rollout)
    served = []
    with manager:
        server.start()
        if server.is_leader:
            with ThreadPoolExecutor(len(PROMPTS)) as pool:
                request = {"temperature": 0.0, "max_tokens": 8}
                ids = [tokenizer(text).input_ids for text in PROMPTS]
                served = [out.token_ids for out in pool.map(lambda p: server.generate(p, request, "tp"), ids)]
        server.stop()
    return served


def main(model_dir: str, out_dir: str, engine: str = "vllm") -> None:
    stacks_after_s = float(os.environ.get("TP_WORKER_STACKS_AFTER_S", "0"))
    if stacks_after_s > 0:  # a hung rank shows where it waits (the GPU test sets it)
        faulthandler.dump_traceback_later(stacks_after_s, repeat=True)
    on_gpu = torch.cuda.is_available()
    if on_gpu:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if on_gpu else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    tokenizer = load_tokenizer(model_dir)
    actor = load_model(model_dir)
    overrides = dict(tensor_model_parallel_size=world)
    if on_gpu:
        actor = actor.cuda()
        overrides.update(dtype="bfloat16", gpu_memory_utilization=0.2)
    config = rollout_config(engine, **overrides)
    rollout, manager = build_rollout(config, model_config(model_dir), tokenizer, actor)
    share = len(PROMPTS) // world
    texts = PROMPTS[rank * share : (rank + 1) * share]
    with manager:
        prompts = manager.preprocess_data(make_prompts(tokenizer, texts, meta_info={"do_sample": False}))
        output = manager.postprocess_data(rollout.generate_sequences(prompts))
    served = serve_single_requests(rollout, manager, tokenizer) if engine == "vllm" else []
    with open(f"{out_dir}/rank{rank}.json", "w") as handle:
        record = {"tp_size": manager.tp_size, "responses": output.batch["responses"].tolist(), "served": served}
        json.dump(record, handle)
    rollout.shutdown()
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
