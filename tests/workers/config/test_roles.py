"""Each config key is declared by exactly one dataclass: shared fields live in one base class.

A field name declared by two classes must be a homonym with a different meaning, listed below with the
reason; anything else is a copy that should move to a shared base (``verl/workers/config/roles.py``)
or become an interpolation in the YAML.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from verl.trainer.config import PPOConfig
from verl.trainer.config.schema_walk import field_specs, is_config_class
from verl.workers.config import ActorConfig, CriticConfig, RefConfig, RolloutConfig

HOMONYMS = {
    "dtype": "the rollout engine's weight dtype vs Megatron's compute dtype",
    "num_workers": "agent-loop worker actors vs reward-function worker processes",
    "tensor_model_parallel_size": "the rollout engine's tensor parallelism vs Megatron training's",
    "enable": "switches of different features (filter_groups, overlong buffer, reward model, critic)",
    "forward_max_token_len_per_gpu": "token budget of the critic's value forward vs of the reward model's forward",
    "n_gpus_per_node": "the training pool's shape vs the reward model's own pool (verl's keys)",
    "nnodes": "the training pool's shape vs the reward model's own pool (verl's keys)",
    "rollout": "the policy's generation engine vs the generative judge's (reward_model.rollout, verl's key)",
    "use_dynamic_bsz": "token-budget micro-batches of the PPO updates vs of the reward model's forward",
    "model": "the policy model (actor_rollout_ref.model) vs the critic's value model vs the reward model",
    "name": "rollout backend vs a function name vs a dataset class name",
    "path": "model folder vs the file of a reward function or dataset class",
    "reward_kwargs": "keyword arguments of the reward manager vs of the custom reward function",
    "seed": "data shuffle seed vs worker RNG seed vs the Megatron engine's initialisation seed",
    "shuffle": "dataset order per epoch vs sequence order within a PPO step",
    "total_training_steps": "the run's step limit vs the schedule length the trainer fills into the optimizer",
    "trust_remote_code": "code shipped with the tokenizer (data) vs with the model",
    "use_shm": "data files vs model weights in shared memory",
    "timeout": "one generative-judge request's limit vs one reward-function call's limit",
    "on_error": "what a failed judge request does vs what a failed reward-function call does",
    "use_remove_padding": "the FSDP forward's packing (model) vs the Megatron engine's micro-batch layout (megatron)",
}


def _config_classes() -> set[type]:
    found, stack = set(), [PPOConfig]
    while stack:
        cls = stack.pop()
        for klass in cls.__mro__:
            if dataclasses.is_dataclass(klass):
                found.add(klass)
        stack += [inner for inner, _, _ in field_specs(cls).values() if is_config_class(inner) and inner not in found]
    return found


def test_no_field_declared_by_two_dataclasses():
    declared_by = defaultdict(list)
    for cls in _config_classes():
        for name in vars(cls).get("__annotations__", {}):
            declared_by[name].append(cls.__name__)
    repeated = {name: sorted(owners) for name, owners in declared_by.items() if len(owners) > 1}
    assert set(repeated) - set(HOMONYMS) == set(), repeated
    assert set(HOMONYMS) - set(repeated) == set(), "stale entries in HOMONYMS"


def test_shared_fields_come_from_one_base():
    # Both PPO-updated roles and both log-prob roles read the same declaration.
    assert ActorConfig.__dataclass_fields__["ppo_mini_batch_size"].default == 256  # verl's
    assert CriticConfig.__dataclass_fields__["ppo_mini_batch_size"].default == 256
    for cls in (RefConfig, RolloutConfig):
        assert "log_prob_micro_batch_size_per_gpu" not in vars(cls).get("__annotations__", {})
        assert "log_prob_micro_batch_size_per_gpu" in cls.__dataclass_fields__
