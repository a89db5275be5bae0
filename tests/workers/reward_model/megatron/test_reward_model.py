"""RewardModelRole with ``strategy=megatron`` on 2 gloo ranks: ``rm_scores`` equal a plain transformers forward of
each text alone, at the last valid response token, for

* TP=2: a sequence classifier on the policy's own tokens (fixed micro-batches of 3 rows: one full, one partial);
  a reward model whose tokenizer and chat template differ from the policy's (the chat re-rendered from the raw
  messages, token-budget micro-batches); a causal LM with a TRL value head;
* PP=2: the sequence classifier again, its scores computed on the last stage and broadcast to the first.

Tensor- and pipeline-parallel peers receive the same rows, so every rank must return the same scores.
Tolerance: ``SCORE_ATOL`` (float32 summation order; tensor parallelism splits the row-parallel sums in two).
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

pytest.importorskip("megatron.core")


def _score_on_rank(rank, world, configs, batch):
    from tests.workers.engine.megatron.helpers import reset_parallel_state
    from verl.workers.reward_model.role import RewardModelRole

    results = {}
    for name, config in configs.items():
        reset_parallel_state()  # each layout builds its own megatron-core groups
        role = RewardModelRole(config)
        output = role.compute_rm_score(batch)  # one data-parallel rank: every rank scores the whole batch
        layout = (role.scorer.dp_rank, role.scorer.is_collect_rank, role.scorer.engine.ranks.pp_rank)
        results[name] = (output.batch["rm_scores"], output.meta_info["metrics"], layout)
    return results


def _config(path: str, tp: int = 1, pp: int = 1, input_tokenizer: str | None = None, **batching):
    from verl.workers.config.megatron import McoreEngineConfig
    from verl.workers.config.reward_model import RewardModelConfig, RewardModelModelConfig

    layout = McoreEngineConfig(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, sequence_parallel=False)
    return RewardModelConfig(
        enable=True,
        strategy="megatron",
        megatron=layout,
        model=RewardModelModelConfig(path=path, input_tokenizer=input_tokenizer),
        **batching,
    )


@pytest.fixture(scope="module")
def scored(tmp_path_factory, batch):
    """Reward models (paths) and every rank's ``(rm_scores, metrics, (dp_rank, collect, pp_rank))``, one 2-rank run."""
    paths = save_reward_models(tmp_path_factory)
    paths["tp2"] = paths["pp2"] = paths.pop("classifier")
    configs = {
        "tp2": _config(paths["tp2"], tp=2, micro_batch_size_per_gpu=3),
        "variant": _config(
            paths["variant"],
            tp=2,
            input_tokenizer=smollm2_path(),
            use_dynamic_bsz=True,
            forward_max_token_len_per_gpu=80,
        ),
        "value_head": _config(paths["value_head"], tp=2, micro_batch_size_per_gpu=4),
        "pp2": _config(paths["pp2"], pp=2, micro_batch_size_per_gpu=2),
    }
    results = run_on_ranks(_score_on_rank, 2, configs, batch)
    return {name: (path, [r[name] for r in results]) for name, path in paths.items()}


def _assert_every_rank_scores(batch, per_rank, scores):
    expected = expected_rm_scores(batch, scores)
    for rm_scores, metrics, _ in per_rank:
        torch.testing.assert_close(rm_scores, expected, atol=SCORE_ATOL, rtol=0)
        assert metrics == {"reward/model/truncated": 0.0}
    assert len(set(round(s, 3) for s in scores)) == len(scores)  # the texts really score differently


def test_tensor_parallel_scores_equal_plain_transformers(scored, batch):
    path, per_rank = scored["tp2"]
    _assert_every_rank_scores(batch, per_rank, policy_token_reference(path, batch))
    # one data-parallel rank; only tensor rank 0 is collected by the single controller
    assert [layout for _, _, layout in per_rank] == [(0, True, 0), (0, False, 0)]


def test_rerendered_chat_with_a_different_tokenizer(scored, batch):
    path, per_rank = scored["variant"]
    _assert_every_rank_scores(batch, per_rank, rerendered_reference(path))


def test_causal_lm_with_value_head(scored, batch):
    path, per_rank = scored["value_head"]
    _assert_every_rank_scores(batch, per_rank, value_head_reference(path, batch))


def test_pipeline_parallel_scores_reach_every_stage(scored, batch):
    path, per_rank = scored["pp2"]
    _assert_every_rank_scores(batch, per_rank, policy_token_reference(path, batch))
    assert [layout for _, _, layout in per_rank] == [(0, False, 0), (0, True, 1)]  # the last stage is collected
