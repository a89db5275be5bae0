"""RewardModelWorker through the single controller (2 Ray workers, gloo): ``compute_rm_score`` dispatches the batch
over the workers and returns ``rm_scores`` equal to a plain transformers sequence-classification forward of each
re-rendered chat, at the last valid response token."""

from __future__ import annotations

import pytest
import ray
import torch

from tests.support.models import smollm2_path
from tests.workers.reward_model.helpers import (
    CHATS,
    RESPONSES,
    chat_batch,
    expected_rm_scores,
    save_sequence_classifier,
    sequence_classifier_score,
)

pytestmark = pytest.mark.slow


def test_reward_model_worker_group_scores_like_transformers(tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
    from verl.workers.config.reward_model import RewardModelConfig, RewardModelModelConfig
    from verl.workers.fsdp_workers import RewardModelWorker

    path = save_sequence_classifier(tmp_path / "rm", tokenizer_variant=True)
    config = RewardModelConfig(
        enable=True,
        model=RewardModelModelConfig(path=path, input_tokenizer=smollm2_path(), use_remove_padding=True),
        micro_batch_size_per_gpu=1,
    )
    batch = chat_batch()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        pool = RayResourcePool([2], use_gpu=False, max_colocate_count=1, cpus_per_bundle=0.5)
        group = RayWorkerGroup(pool, RayClassWithInitArgs(RewardModelWorker, config=config))
        group.init_model()
        output = group.compute_rm_score(batch)
    finally:
        ray.shutdown()

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32)
    scores = []
    for chat, response in zip(CHATS, RESPONSES):
        messages = chat + [{"role": "assistant", "content": response}]
        scores.append(
            sequence_classifier_score(model, tokenizer.apply_chat_template(messages, return_dict=True)["input_ids"])
        )
    torch.testing.assert_close(output.batch["rm_scores"], expected_rm_scores(batch, scores), atol=2e-5, rtol=0)
    assert output.meta_info["metrics"] == {"reward/model/truncated": 0.0}
