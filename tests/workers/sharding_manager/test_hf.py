"""The ``hf`` manager copies nothing and restores the module's train/eval mode."""

import torch

from verl.workers.sharding_manager import HFShardingManager


def test_switches_to_eval_and_restores_mode():
    module = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))
    manager = HFShardingManager(module)
    for initially_training in (True, False):
        module.train(initially_training)
        with manager:
            assert not module.training and not module[1].training
        assert module.training is initially_training
        assert manager.metrics["timing_s/update_weights"] == 0.0
        assert {"perf/rollout_memory_gb", "perf/training_memory_gb"} <= set(manager.metrics)
