"""One rank of the tensor-parallel test (launched by torchrun from test_vllm_tensor_parallel.py).

Usage: ``torchrun --nproc-per-node 2 -m tests.workers.rollout.vllm_rollout.tp_worker MODEL_DIR OUT_DIR``.
Each rank holds a different half of the prompts; the TP group gathers them, generates, and keeps its share.
Then the same engine serves single requests (``rollout.mode=async``): rank 0 sends every prompt at once, rank 1
steps in lockstep with it.
"""

import json
import sys
from concurrent.futures import ThreadPoolExecutor

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


def main(model_dir: str, out_dir: str) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    tokenizer = load_tokenizer(model_dir)
    actor = load_model(model_dir)
    config = rollout_config("vllm", mode="async", tensor_model_parallel_size=world)
    rollout, manager = build_rollout(config, model_config(model_dir), tokenizer, actor)
    texts = PROMPTS[rank * 2 : rank * 2 + 2]
    with manager:
        prompts = manager.preprocess_data(make_prompts(tokenizer, texts, meta_info={"do_sample": False}))
        output = manager.postprocess_data(rollout.generate_sequences(prompts))
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
    with open(f"{out_dir}/rank{rank}.json", "w") as handle:
        record = {"tp_size": manager.tp_size, "responses": output.batch["responses"].tolist(), "served": served}
        json.dump(record, handle)
    rollout.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
