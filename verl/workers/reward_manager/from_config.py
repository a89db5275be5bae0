"""The run's reward function from ``reward_model``: the plain reward manager, or a :class:`CombinedReward` of the
rule, model and judge sources when a reward model or ``reward_model.combine`` is configured."""

from __future__ import annotations

from typing import Any

from verl.workers.reward_manager.combined import CombinedReward
from verl.workers.reward_manager.guard import CallPolicy, GuardedSource
from verl.workers.reward_manager.sources import JudgeSource, ModelScoreSource, RuleSource


def typed_reward_model_config(reward_model: Any):
    """``reward_model`` as a typed ``RewardModelConfig`` (a DictConfig or dict is checked and converted)."""
    from verl.utils.config import as_typed_config
    from verl.workers.config.reward_model import RewardModelConfig

    return as_typed_config(reward_model if reward_model is not None else {}, RewardModelConfig, "reward_model")


def needs_combination(reward_model: Any) -> bool:
    """Whether a reward model runs or ``combine`` is set (else the reward manager alone is the reward function)."""
    config = typed_reward_model_config(reward_model)
    return bool(config.enable or config.combine.weights or config.combine.data_sources)


def build_judge_source(config: Any, tokenizer: Any, reward_fn_key: str, client: Any = None) -> GuardedSource:
    """The judge as a guarded source: ``client`` (default: the run's shared :class:`RemoteJudge` actors) under the
    ``judge.timeout`` / ``judge.on_error`` policy with ``judge.default_score`` as fallback."""
    from verl.workers.reward_model.judge.judge import GenerativeJudge

    if client is None:
        from verl.workers.reward_model.judge.server import RemoteJudge

        model = config.model
        client = RemoteJudge(
            model.path, config.rollout, config.num_workers, bool(model.trust_remote_code), model.external_lib
        )
    judge = GenerativeJudge(config.judge, client)
    policy = CallPolicy(
        timeout=float(config.judge.timeout),
        on_error=config.judge.on_error,
        fallback_score=float(config.judge.default_score),
        keys="reward_model.judge.timeout / reward_model.judge.on_error",
    )
    return GuardedSource(JudgeSource(judge, tokenizer, reward_fn_key), policy, reward_fn_key)


def build_reward_fn(reward_model: Any, manager: Any, tokenizer: Any, reward_fn_key: str = "data_source") -> Any:
    """``manager`` itself, or the :class:`CombinedReward` of the sources ``reward_model`` weights."""
    config = typed_reward_model_config(reward_model)
    if not needs_combination(config):
        return manager
    weights = config.source_weights()
    sources: dict[str, Any] = {}
    if "rule" in weights:
        sources["rule"] = RuleSource(manager)
    if "model" in weights:
        sources["model"] = ModelScoreSource()
    if "judge" in weights:
        sources["judge"] = build_judge_source(config, tokenizer, reward_fn_key)
    return CombinedReward(sources, weights, config.sources_for, reward_fn_key)


def start_remote_sources(reward_fn: Any) -> None:
    """Load the judge's actors now (when Ray runs), from the process that builds the reward function: they then
    live as long as it does, and the first step does not pay for the load."""
    import ray

    if not isinstance(reward_fn, CombinedReward) or not ray.is_initialized():
        return
    judge = reward_fn.sources.get("judge")
    client = getattr(getattr(getattr(judge, "source", None), "judge", None), "client", None)
    start = getattr(client, "start", None)
    if start is not None:
        start()
