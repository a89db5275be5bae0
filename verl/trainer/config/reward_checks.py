"""Cross-field checks of ``reward_model``: the reward model, the generative judge and the score combination.

Each message names every key involved and the fix; they run before Ray or any model starts.
"""

from __future__ import annotations

import importlib.util
import os

from verl.trainer.config.root import PPOConfig
from verl.workers.config.model import DEFAULT_MODEL_PATH
from verl.workers.config.reward_model import REWARD_SOURCES, RewardModelConfig


def _discriminative_errors(cfg: PPOConfig) -> list[str]:
    rm = cfg.reward_model
    rollout = cfg.actor_rollout_ref.rollout
    errors = []
    from verl.workers.reward_model.base import REWARD_SCORER_REGISTRY

    strategy_error = REWARD_SCORER_REGISTRY.error(rm.strategy)
    if strategy_error is not None:
        errors.append(f"{strategy_error} (its YAML follows actor_rollout_ref.actor.strategy)")
    if not rm.use_dynamic_bsz and rm.micro_batch_size_per_gpu is None:
        errors.append(
            "reward_model.micro_batch_size_per_gpu is null while reward_model.use_dynamic_bsz=False; set it (e.g. 8) "
            "or set reward_model.use_dynamic_bsz=True"
        )
    seq_len = rollout.prompt_length + rollout.response_length
    if rm.use_dynamic_bsz and rm.model.input_tokenizer is None and rm.forward_max_token_len_per_gpu < seq_len:
        errors.append(
            f"reward_model.forward_max_token_len_per_gpu={rm.forward_max_token_len_per_gpu} is below one full sequence "
            f"(actor_rollout_ref.rollout.prompt_length + response_length = {seq_len}); raise it to >= {seq_len}"
        )
    if rm.model.input_tokenizer is not None and not cfg.data.return_raw_chat:
        errors.append(
            f"reward_model.model.input_tokenizer={rm.model.input_tokenizer!r} re-renders each chat with the reward "
            "model's chat template, which needs the raw messages: set data.return_raw_chat=True, or "
            "reward_model.model.input_tokenizer=null when the reward model shares the policy's tokenizer"
        )
    if rm.enable_resource_pool and (rm.n_gpus_per_node <= 0 or rm.nnodes <= 0):
        errors.append(
            f"reward_model.enable_resource_pool=True needs reward_model.n_gpus_per_node > 0 and reward_model.nnodes "
            f"> 0 (got {rm.n_gpus_per_node} and {rm.nnodes})"
        )
    return errors


def _judge_errors(rm: RewardModelConfig) -> list[str]:
    from verl.workers.reward_model.judge.engines import JUDGE_ENGINE_REGISTRY
    from verl.workers.reward_model.judge.prompts import template_errors

    judge, rollout = rm.judge, rm.rollout
    errors = template_errors(judge.prompt_template)
    module = JUDGE_ENGINE_REGISTRY.info(rollout.name).get("requires")
    if module is not None and importlib.util.find_spec(module) is None:
        errors.append(
            f"reward_model.rollout.name={rollout.name!r} needs the {module!r} package, which is not installed; "
            "install it or choose another judge engine (e.g. reward_model.rollout.name=hf)"
        )
    if judge.max_score <= judge.min_score:
        errors.append(
            f"reward_model.judge.max_score={judge.max_score} must exceed reward_model.judge.min_score={judge.min_score}"
        )
    if rollout.tensor_model_parallel_size != 1:
        errors.append(
            f"reward_model.rollout.tensor_model_parallel_size={rollout.tensor_model_parallel_size}: the judge engine "
            "runs in one process in this build; set it to 1 and use reward_model.num_workers for more replicas"
        )
    total = rollout.prompt_length + rollout.response_length
    if rollout.max_model_len is not None and total > rollout.max_model_len:
        errors.append(
            f"reward_model.rollout.prompt_length + response_length = {total} exceeds reward_model.rollout."
            f"max_model_len={rollout.max_model_len}; lower the lengths or raise max_model_len"
        )
    return errors


def _combine_errors(cfg: PPOConfig) -> list[str]:
    rm = cfg.reward_model
    combine = rm.combine
    errors = []
    named = {f"reward_model.combine.weights.{name}": name for name in combine.weights}
    for data_source, sources in combine.data_sources.items():
        if not isinstance(sources, list) or not sources:
            errors.append(
                f"reward_model.combine.data_sources.{data_source}={sources!r} must be a non-empty list of sources "
                f"({', '.join(REWARD_SOURCES)})"
            )
            continue
        named.update({f"reward_model.combine.data_sources.{data_source}": name for name in sources})
    running = {"rule", rm.model_source()} - {None}
    for key, name in named.items():
        if name not in REWARD_SOURCES:
            errors.append(f"{key} names the reward source {name!r}; sources: {', '.join(REWARD_SOURCES)}")
        elif name not in running:
            needs = "reward_model.enable=True and use_reward_loop=" + ("True" if name == "judge" else "False")
            errors.append(f"{key} uses the {name!r} source, which runs only with {needs}")
    model_source = rm.model_source()
    if model_source is not None and (combine.weights or combine.data_sources):
        if model_source not in set(named.values()):
            errors.append(
                f"reward_model.enable=True loads a reward model, but reward_model.combine never uses the "
                f"{model_source!r} source; add it to reward_model.combine.weights or set reward_model.enable=False"
            )
    return errors


def reward_model_errors(cfg: PPOConfig) -> list[str]:
    """Every inconsistency of the ``reward_model`` section (empty when it is consistent)."""
    rm = cfg.reward_model
    errors = []
    if rm.enable and not rm.use_reward_loop and rm.model.path in (DEFAULT_MODEL_PATH, ""):
        errors.append(
            f"reward_model.enable=True needs reward_model.model.path (now {rm.model.path!r}, the embedded chat model, "
            "which has no reward head): a sequence-classification reward model or a causal LM with a value head; "
            "or set reward_model.use_reward_loop=True to use a causal LM as a generative judge"
        )
    local = rm.model.path.startswith(("/", "~", "./", "../"))
    if rm.enable and local and not os.path.isdir(os.path.expanduser(rm.model.path)):
        errors.append(
            f"reward_model.model.path={rm.model.path!r} is not a folder; point it at a Hugging Face model folder "
            "(or a hub id)"
        )
    if rm.enable and not rm.use_reward_loop:
        errors += _discriminative_errors(cfg)
    if rm.enable and rm.use_reward_loop:
        errors += _judge_errors(rm)
    errors += _combine_errors(cfg)
    return errors
