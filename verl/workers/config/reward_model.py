"""Reward config (``reward_model``): the reward manager, an optional reward model, and how their scores combine.

Three reward sources can score a response (``docs/reward_model.md``):

- ``rule``: the reward manager (``reward_model.reward_manager``) with the rule scorer or the custom reward function;
- ``model``: a discriminative reward model on the training engine (``reward_model.enable=True``);
- ``judge``: a generative judge served by a rollout engine (``reward_model.enable=True`` and ``use_reward_loop=True``).

``combine`` weights them and selects which apply to each ``data_source``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.workers.config.base import BaseConfig, bounded_field, choice_field, registry_field
from verl.workers.config.model import ModelSourceConfig
from verl.workers.config.reward_scoring import RewardScoringConfig
from verl.workers.config.roles import EngineRoleConfig, FSDPHolderConfig
from verl.workers.config.rollout import RolloutConfig

REWARD_SOURCES = ("rule", "model", "judge")
"""Names of the reward sources ``reward_model.combine`` can weight."""

JUDGE_ERROR_POLICIES = ("raise", "fallback")
"""What a judge call that times out or fails does: stop the run, or score the call's samples with the default."""

DEFAULT_JUDGE_TEMPLATE = (
    "Rate how well the response answers the question, from 0 (wrong or useless) to 10 (correct and helpful).\n\n"
    "Question:\n{prompt}\n\nResponse:\n{response}\n\n"
    "Reply with the rating as a single number on the last line."
)
"""Default user message of the judge (placeholders: see ``verl.workers.reward_model.judge.prompts``)."""


@dataclass
class OverlongBufferConfig(BaseConfig):
    """DAPO's soft overlong punishment (arXiv:2503.14476, eq. 13): a linear penalty near the length limit."""

    enable: bool = False
    """Penalise responses that enter the last ``len`` tokens before ``data.max_response_length``."""

    len: int = bounded_field(0, ge=0)
    """Length of the penalty zone in tokens."""

    penalty_factor: float = bounded_field(1.0, ge=0.0)
    """Penalty at the length limit; it grows linearly from 0 at the start of the zone."""

    log: bool = False
    """Report the overlong penalty in the reward's extra info."""


@dataclass
class SandboxFusionConfig(BaseConfig):
    """A SandboxFusion server that runs code responses against their test cases (code data sources)."""

    url: str | None = None
    """``run_code`` endpoint of the server; null runs the tests locally in bounded subprocesses."""

    max_concurrent: int = bounded_field(64, gt=0)
    """Requests in flight to the server at once, per process."""

    memory_limit_mb: int = bounded_field(1024, gt=0)
    """Memory limit of one run in the sandbox."""


@dataclass
class RewardModelModelConfig(ModelSourceConfig, FSDPHolderConfig):
    """The reward model's weights, tokenizer and sharding (``reward_model.model``).

    ``path`` is a sequence-classification model (one label) or a causal LM with a value head (``v_head``); with
    ``use_reward_loop`` it is the judge's causal LM, and there the default (the embedded SmolLM2) is usable.
    """

    input_tokenizer: str | None = None
    """Tokenizer the policy's batch was made with. When set, each chat is decoded with it and re-rendered with the
    reward model's own tokenizer and chat template (needs ``data.return_raw_chat``); null feeds the policy's token
    ids to the reward model unchanged (they must share the vocabulary). The shipped YAML sets the policy path."""


@dataclass
class GenerativeJudgeConfig(BaseConfig):
    """How the generative judge turns a response into a score (``reward_model.judge``; this build's addition)."""

    prompt_template: str = DEFAULT_JUDGE_TEMPLATE
    """User message sent to the judge, a ``str.format`` template with ``{prompt}`` (the last user message of the
    chat), ``{response}``, ``{ground_truth}`` and ``{data_source}``; rendered with the judge's chat template."""

    system_prompt: str | None = None
    """System message placed before the template; null sends none."""

    parser: str = registry_field("last_number", "verl.workers.reward_model.judge.parsers:JUDGMENT_PARSER_REGISTRY")
    """Registered judgment parser (``verl.workers.reward_model.judge.get_judgment_parser``): ``last_number``,
    ``score_tag`` (``<score>x</score>``), ``boxed`` (``\\boxed{x}``) or ``yes_no``."""

    min_score: float = 0.0
    """Lowest rating the template asks for; a parsed rating outside [min_score, max_score] counts as unparsable."""

    max_score: float = 10.0
    """Highest rating the template asks for."""

    normalize: bool = True
    """Map the rating to [0, 1]: ``(rating - min_score) / (max_score - min_score)``."""

    default_score: float = 0.0
    """Score of a judgment that cannot be parsed, of a judge prompt longer than ``rollout.prompt_length``, and (with
    ``on_error: fallback``) of every sample of a judge call that timed out or failed."""

    timeout: float = bounded_field(600.0, gt=0.0)
    """Seconds one judge call (one batch) may take before ``on_error`` applies; the stuck engine is restarted."""

    on_error: str = choice_field("raise", JUDGE_ERROR_POLICIES)
    """A judge call that times out or raises: ``raise`` stops the run with an error naming the judge and the cause
    (saved checkpoints stay intact); ``fallback`` gives its samples ``default_score`` and counts them."""


@dataclass
class JudgeRolloutConfig(RolloutConfig):
    """The judge's generation engine (``reward_model.rollout``): a rollout config whose backend is a judge engine."""

    name: str = registry_field("vllm", "verl.workers.reward_model.judge.engines:JUDGE_ENGINE_REGISTRY")
    """Registered judge engine (``verl.workers.reward_model.judge.engines.get_judge_engine_cls``): built in are
    ``vllm`` and ``hf``; ``@register_judge_engine`` adds more. Validation rejects an unregistered name."""


@dataclass
class RewardCombineConfig(BaseConfig):
    """How rule, model and judge scores add up (``reward_model.combine``; this build's addition).

    ``score = sum(weights[s] * score_s for s in the sources that apply to the sample's data_source)``.
    """

    weights: dict[str, float] = field(default_factory=dict)
    """Weight per source (``rule``, ``model``, ``judge``). Empty: verl's behaviour, the reward model alone when
    ``reward_model.enable`` (``model`` or ``judge``), else the rule reward alone. A listed source runs for every
    data source not named in ``data_sources``; a source without a weight weighs 1.0."""

    data_sources: dict[str, list[str]] = field(default_factory=dict)
    """Sources that apply per ``data_source`` value, e.g. ``{openai/gsm8k: [rule], hh_rlhf: [model]}``; data sources
    not listed use the sources of ``weights``. The rule scorer never runs on samples whose sources omit ``rule``."""


@dataclass
class RewardModelConfig(EngineRoleConfig):
    """Reward computation: the reward manager and, with ``enable``, a reward model and the score combination."""

    enable: bool = False
    """Score responses with a reward model (``model.path``): discriminative on the training engine, or a generative
    judge when ``use_reward_loop`` is true."""

    model: RewardModelModelConfig = field(default_factory=RewardModelModelConfig)
    """Reward model weights, tokenizer and sharding."""

    micro_batch_size: int | None = bounded_field(None, gt=0)
    """Deprecated global spelling: when set, ``micro_batch_size_per_gpu`` becomes it divided by the world size."""

    micro_batch_size_per_gpu: int | None = bounded_field(None, gt=0)
    """Sequences per reward-model forward pass on one worker (needed unless ``use_dynamic_bsz``)."""

    max_length: int | None = bounded_field(None, gt=0)
    """Longest re-rendered reward-model input in tokens; longer inputs keep their end (where the score is read).
    Null: the policy's ``prompt_length + response_length``."""

    use_dynamic_bsz: bool = False
    """Form reward-model micro-batches by token count (``forward_max_token_len_per_gpu``)."""

    forward_max_token_len_per_gpu: int = bounded_field(16384, gt=0)
    """Token budget of one reward-model micro-batch when ``use_dynamic_bsz`` is true."""

    enable_resource_pool: bool = False
    """Run the reward model on its own resource pool (``n_gpus_per_node`` x ``nnodes``) instead of the actor's
    devices (where its weights stay offloaded between uses with ``model.fsdp_config.param_offload``, or
    ``megatron.param_offload`` on the Megatron engine, which then also shares the actor's megatron-core layout)."""

    n_gpus_per_node: int = bounded_field(0, ge=0)
    """Devices per node of the reward model's own pool (``enable_resource_pool``)."""

    nnodes: int = bounded_field(0, ge=0)
    """Nodes of the reward model's own pool (``enable_resource_pool``)."""

    use_reward_loop: bool = False
    """Serve the reward model on a rollout engine (``rollout``) as a generative judge (``judge``) instead of
    scoring it on the training engine."""

    num_workers: int = bounded_field(1, gt=0)
    """Judge engine replicas (Ray actors) a batch is split over (``use_reward_loop``)."""

    rollout: JudgeRolloutConfig = field(
        default_factory=lambda: JudgeRolloutConfig(
            name="vllm",
            n=1,
            temperature=0.0,
            do_sample=False,
            prompt_length=1024,
            response_length=64,
            dtype="bfloat16",
            load_format="auto",
            free_cache_engine=False,
            gpu_memory_utilization=0.1,
        )
    )
    """The judge's generation engine (``use_reward_loop``): backend ``name`` (vllm or hf), ``prompt_length`` (longest
    judge prompt), ``response_length`` (judgment tokens), sampling and memory. Greedy by default."""

    judge: GenerativeJudgeConfig = field(default_factory=GenerativeJudgeConfig)
    """Prompt template, parser and failure handling of the generative judge."""

    combine: RewardCombineConfig = field(default_factory=RewardCombineConfig)
    """Weights of the rule, model and judge scores and which apply per data source."""

    reward_manager: str = registry_field("naive", "verl.workers.reward_manager.registry:REWARD_MANAGER_REGISTRY")
    """Registered reward manager (``verl.workers.reward_manager.get_reward_manager_cls``): e.g. naive, dapo."""

    launch_reward_fn_async: bool = False
    """Compute the reward function (rule scores, model-score combination, judge) in another process (a Ray actor)
    while the old/reference log-probs and values are computed; the discriminative reward model's forward stays in
    the step."""

    reward_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments of the reward manager's constructor (verl's DAPO scripts pass
    ``+reward_model.reward_kwargs.overlong_buffer_cfg.*`` and ``max_resp_len`` here; they take precedence
    over ``overlong_buffer``)."""

    sandbox_fusion: SandboxFusionConfig = field(default_factory=SandboxFusionConfig)
    """Where code responses are executed (``default_compute_score``'s ``sandbox_fusion_url``)."""

    overlong_buffer: OverlongBufferConfig = field(default_factory=OverlongBufferConfig)
    """DAPO overlong-buffer penalty used by the ``dapo`` reward manager."""

    scoring: RewardScoringConfig = field(default_factory=RewardScoringConfig)
    """Time limit and failure policy of every reward-function call (the reward manager's scoring processes)."""

    def model_source(self) -> str | None:
        """``model``, ``judge`` or None: the reward-model source this config runs."""
        if not self.enable:
            return None
        return "judge" if self.use_reward_loop else "model"

    def source_weights(self) -> dict[str, float]:
        """Weight of every source that runs somewhere (see :class:`RewardCombineConfig`)."""
        named = dict(self.combine.weights)
        if not named:
            named = {self.model_source() or "rule": 1.0}
        for sources in self.combine.data_sources.values():
            for source in sources:
                named.setdefault(source, 1.0)
        return {name: float(weight) for name, weight in named.items()}

    def sources_for(self, data_source: str) -> list[str]:
        """Sources that score samples of ``data_source``."""
        if data_source in self.combine.data_sources:
            return list(self.combine.data_sources[data_source])
        return list(self.combine.weights) or [self.model_source() or "rule"]


FSDPRewardModelConfig = RewardModelConfig
"""verl's name of the FSDP reward-model config (one config serves both engines: ``strategy`` selects FSDP2 or
Megatron, which reads ``megatron``)."""
