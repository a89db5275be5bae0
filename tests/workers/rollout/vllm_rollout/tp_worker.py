"""One rank of the tensor-parallel test (launched by torchrun from test_vllm_tensor_parallel.py).

Usage: ``torchrun --nproc-per-node 2 -m tests.workers.rollout.vllm_rollout.tp_worker MODEL_DIR OUT_DIR``.
Each rank holds a different half of the prompts; the TP group gathers them, generates, and keeps its share.
"""

import json
import sys

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


def main(model_dir: str, out_dir: str) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    tokenizer = load_tokenizer(model_dir)
    actor = load_model(model_dir)
    config = rollout_config("vllm", tensor_model_parallel_size=world)
    rollout, manager = build_rollout(config, model_config(model_dir), tokenizer, actor)
    texts = PROMPTS[rank * 2 : rank * 2 + 2]
    with manager:
        prompts = manager.preprocess_data(make_prompts(tokenizer, texts, meta_info={"do_sample": False}))
        output = manager.postprocess_data(rollout.generate_sequences(prompts))
    with open(f"{out_dir}/rank{rank}.json", "w") as handle:
        json.dump({"tp_size": manager.tp_size, "responses": output.batch["responses"].tolist()}, handle)
    rollout.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
