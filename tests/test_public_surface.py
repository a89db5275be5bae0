"""The names verl users import resolve here (verl's module paths), and ``import verl`` stays light."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

PUBLIC_NAMES = {
    "verl": ["DataProto", "DataProtoFuture"],
    "verl.protocol": [
        "DataProto",
        "DataProtoConfig",
        "DataProtoFuture",
        "all_gather_data_proto",
        "deserialize_single_tensor",
        "deserialize_tensordict",
        "fold_batch_dim",
        "pad_dataproto_to_divisor",
        "serialize_single_tensor",
        "serialize_tensordict",
        "unfold_batch_dim",
        "union_numpy_dict",
        "union_tensor_dict",
        "unpad_dataproto",
    ],
    "verl.utils": ["hf_processor", "hf_tokenizer", "omega_conf_to_dataclass", "tensordict_utils", "fs", "hdfs_io"],
    "verl.utils.fs": ["copy_to_local", "copy_local_path_from_hdfs", "is_non_local", "copy_to_shm", "local_mkdir_safe"],
    "verl.utils.hdfs_io": ["copy", "exists", "makedirs"],
    "verl.utils.seqlen_balancing": [
        "get_group_balanced_partitions",
        "get_seqlen_balanced_partitions",
        "prepare_dynamic_batch",
        "rearrange_micro_batches",
        "restore_dynamic_batch",
    ],
    "verl.utils.torch_functional": [
        "allgather_dict_into_dict",
        "distributed_masked_mean",
        "distributed_mean_max_min_std",
        "expand_as_nested",
        "log_probs_from_logits_all_rmpad",
    ],
    "verl.trainer.ppo.core_algos": [
        "compute_grpo_vectorized_outcome_advantage",
        "compute_rloo_vectorized_outcome_advantage",
    ],
    "verl.single_controller.ray.base": [
        "create_colocated_worker_cls",
        "create_colocated_worker_raw_cls",
        "merge_resource_pool",
        "split_resource_pool",
    ],
    "verl.trainer.main_ppo": ["create_rl_dataset", "create_rl_sampler", "run_ppo", "TaskRunner"],
    "verl.workers.config": [
        "ActorConfig",
        "CheckpointConfig",
        "CriticConfig",
        "CriticModelCfg",
        "FSDPActorConfig",
        "FSDPCriticConfig",
        "FSDPCriticModelCfg",
        "FSDPEngineConfig",
        "FSDPOptimizerConfig",
        "HFModelConfig",
        "McoreEngineConfig",
        "OptimizerConfig",
        "PolicyLossConfig",
        "RolloutConfig",
    ],
    "verl.utils.reward_score": ["default_compute_score"],
    "verl.utils.reward_score.gsm8k": ["compute_score"],
    "verl.utils.reward_score.math": ["compute_score"],
    "verl.utils.reward_score.math_dapo": ["compute_score"],
    "verl.utils.reward_score.prime_math": ["compute_score"],
    "verl.utils.reward_score.geo3k": ["compute_score"],
    "verl.utils.reward_score.search_r1_like_qa_em": ["compute_score"],
    "verl.utils.reward_score.prime_code": ["compute_score"],
    "verl.utils.reward_score.sandbox_fusion": ["compute_score"],
    "verl.utils.reward_score.sandbox_fusion.utils": ["check_correctness", "call_sandbox_api"],
}


@pytest.mark.parametrize("module", sorted(PUBLIC_NAMES))
def test_public_names_resolve(module):
    """``from <module> import <name>`` works for every name (a submodule name included)."""
    missing = []
    for name in PUBLIC_NAMES[module]:
        try:
            exec(f"from {module} import {name}", {})
        except ImportError:
            missing.append(name)
    assert missing == []


def test_import_verl_does_not_import_torch():
    code = "import sys, verl, verl.utils; assert 'torch' not in sys.modules; from verl import DataProto; print('ok')"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "ok\n"


def test_vectorized_estimators_match_a_loop_reference():
    from verl.trainer.ppo.core_algos import (
        compute_grpo_vectorized_outcome_advantage,
        compute_rloo_vectorized_outcome_advantage,
    )

    rewards = torch.zeros(5, 3, dtype=torch.float64)
    rewards[:, -1] = torch.tensor([1.0, 0.0, 2.0, 3.0, 5.0], dtype=torch.float64)
    mask = torch.ones(5, 3, dtype=torch.float64)
    index = np.array(["a", "a", "a", "b", "b"], dtype=object)
    grpo, _ = compute_grpo_vectorized_outcome_advantage(rewards, mask, index, config=None)
    rloo, _ = compute_rloo_vectorized_outcome_advantage(rewards, mask, index, config=None)
    scores = [1.0, 0.0, 2.0, 3.0, 5.0]
    groups = {"a": [0, 1, 2], "b": [3, 4]}
    for members in groups.values():
        values = np.array([scores[i] for i in members])
        for i in members:
            expected_grpo = (scores[i] - values.mean()) / (values.std(ddof=1) + 1e-6)
            expected_rloo = scores[i] - (values.sum() - scores[i]) / (len(members) - 1)
            assert grpo[i, 0].item() == pytest.approx(expected_grpo, abs=1e-9)
            assert rloo[i, 0].item() == pytest.approx(expected_rloo, abs=1e-12)
