"""Generation dumps: one jsonl line per sample with the decoded texts, the score and the extra info."""

from __future__ import annotations

import json

import numpy as np
import torch
from transformers import AutoTokenizer

from tests.support.models import tiny_model_path
from verl.protocol import DataProto
from verl.trainer.ppo.generation_dump import dump_batch_generations, dump_generations


def test_dump_generations_skips_extra_info_of_other_length(tmp_path):
    path = dump_generations(["p1", "p2"], ["r1", "r2"], [1.0, 0.0], {"acc": [1, 0], "bad": [1]}, 3, str(tmp_path))
    lines = [json.loads(line) for line in open(path)]
    assert path.endswith("3.jsonl")
    assert lines == [
        {"input": "p1", "output": "r1", "score": 1.0, "step": 3, "acc": 1},
        {"input": "p2", "output": "r2", "score": 0.0, "step": 3, "acc": 0},
    ]


def test_dump_batch_decodes_prompts_and_responses(tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path("llama"))
    prompt_ids = tokenizer(["What is 2+2?"], return_tensors="pt")["input_ids"]
    response_ids = tokenizer(["4"], return_tensors="pt")["input_ids"]
    scores = torch.zeros(1, response_ids.shape[1])
    scores[0, -1] = 1.0
    batch = DataProto.from_dict(
        tensors={"prompts": prompt_ids, "responses": response_ids, "token_level_scores": scores},
        non_tensors={"acc": np.array([1.0], dtype=object)},
    )
    path = dump_batch_generations(batch, tokenizer, step=7, dump_dir=str(tmp_path))
    assert json.loads(open(path).read()) == {
        "input": "What is 2+2?",
        "output": "4",
        "score": 1.0,
        "step": 7,
        "acc": 1.0,
    }
