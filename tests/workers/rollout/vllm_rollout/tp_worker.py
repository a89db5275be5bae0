"""One rank of the tensor-parallel tests (launched by torchrun from test_vllm_tensor_parallel.py and
tests/workers/rollout/test_tensor_parallel_gpu.py).

Usage: ``torchrun --nproc-per-node N -m tests.workers.rollout.vllm_rollout.tp_worker MODEL_DIR OUT_DIR [ENGINE]``
(ENGINE: ``vllm`` (default) or ``sglang``; on a GPU machine each rank takes GPU ``LOCAL_RANK`` and the engine
runs in bf16). The prompts are split evenly over the ranks; the TP group gathers them, generates greedily, and
each rank keeps its share.
"""

import json
import os
import sys

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


def main(model_dir: str, out_dir: str, engine: str = "vllm") -> None:
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
    with open(f"{out_dir}/rank{rank}.json", "w") as handle:
        json.dump({"tp_size": manager.tp_size, "responses": output.batch["responses"].tolist()}, handle)
    rollout.shutdown()
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
