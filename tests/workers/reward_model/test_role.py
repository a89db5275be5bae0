"""RewardModelRole on 2 gloo ranks: ``rm_scores`` equal a plain transformers ``AutoModelForSequenceClassification``
forward of each text alone, (1) on the policy's own tokens, (2) with a reward model whose tokenizer differs
(added tokens, another chat template): the chat re-rendered from the raw messages, (3) for a causal LM with a
TRL value head: the final hidden state times the head. Each score sits at the last valid response token.

Tolerance: ``SCORE_ATOL`` (float32 summation order, see ``helpers``).
"""

from __future__ import annotations

import pytest
import torch

from tests.support.models import smollm2_path
from tests.workers.engine.fsdp.distributed import run_on_ranks
from tests.workers.reward_model.helpers import (
    SCORE_ATOL,
    expected_rm_scores,
    policy_token_reference,
    rerendered_reference,
    save_reward_models,
    value_head_reference,
)

pytestmark = pytest.mark.slow


def _score_on_rank(rank, world, configs, batch):
    from verl.workers.reward_model.role import RewardModelRole

    share = batch.chunk(world)[rank]
    results = {}
    for name, config in configs.items():
        output = RewardModelRole(config).compute_rm_score(share)
        results[name] = (output.batch["rm_scores"], output.meta_info["metrics"])
    return results


@pytest.fixture(scope="module")
def scored(tmp_path_factory, batch):
    """Three reward models (paths) and their ``rm_scores`` over the batch, from one 2-rank run."""
    from verl.workers.config.reward_model import RewardModelConfig, RewardModelModelConfig

    paths = save_reward_models(tmp_path_factory)
    configs = {
        "classifier": RewardModelConfig(
            enable=True,
            model=RewardModelModelConfig(path=paths["classifier"], input_tokenizer=None, use_remove_padding=True),
            micro_batch_size_per_gpu=1,
        ),
        "variant": RewardModelConfig(
            enable=True,
            model=RewardModelModelConfig(path=paths["variant"], input_tokenizer=smollm2_path()),
            use_dynamic_bsz=True,
            forward_max_token_len_per_gpu=80,
        ),
        "value_head": RewardModelConfig(
            enable=True,
            model=RewardModelModelConfig(path=paths["value_head"], input_tokenizer=None, use_remove_padding=True),
            micro_batch_size_per_gpu=2,
        ),
    }
    results = run_on_ranks(_score_on_rank, 2, configs, batch)
    return {name: (path, torch.cat([r[name][0] for r in results]), results[0][name][1]) for name, path in paths.items()}


def test_policy_tokens_scored_as_plain_transformers(scored, batch):
    path, rm_scores, metrics = scored["classifier"]
    scores = policy_token_reference(path, batch)
    torch.testing.assert_close(rm_scores, expected_rm_scores(batch, scores), atol=SCORE_ATOL, rtol=0)
    assert len(set(round(s, 3) for s in scores)) == len(scores)  # the texts really score differently
    assert metrics["reward/model/truncated"] == 0


def test_rerendered_chat_with_a_different_tokenizer(scored, batch):
    path, rm_scores, _ = scored["variant"]
    scores = rerendered_reference(path)
    torch.testing.assert_close(rm_scores, expected_rm_scores(batch, scores), atol=SCORE_ATOL, rtol=0)


def test_causal_lm_with_value_head(scored, batch):
    path, rm_scores, _ = scored["value_head"]
    scores = value_head_reference(path, batch)
    torch.testing.assert_close(rm_scores, expected_rm_scores(batch, scores), atol=SCORE_ATOL, rtol=0)


def test_truncated_rerendering_keeps_the_end(batch):
    from verl.workers.reward_model.inputs import rerendered_inputs
    from verl.workers.reward_model.role import load_tokenizer

    tokenizer = load_tokenizer(smollm2_path(), False)
    full = rerendered_inputs(batch, tokenizer, tokenizer, max_length=10_000)
    cut = rerendered_inputs(batch, tokenizer, tokenizer, max_length=20)
    assert cut.num_truncated == len(batch) and full.num_truncated == 0
    for i in range(len(batch)):
        ids = full.input_ids[i][full.attention_mask[i].bool()]
        torch.testing.assert_close(cut.input_ids[i][cut.attention_mask[i].bool()], ids[-20:])
