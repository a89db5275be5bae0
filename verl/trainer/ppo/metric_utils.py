"""Metrics the trainer logs each step and after validation, with verl's metric names.

Training metrics (``compute_data_metrics``) summarise one batch: scores and rewards per sequence, advantages,
returns and values per valid response token, and prompt / response lengths. Validation metrics
(``process_validation_metrics``) summarise N responses per prompt as mean@N, std@N and bootstrapped
best@k / worst@k / maj@k (the estimators of verl's ``metric_utils``, as in "Let's Verify Step by Step").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import torch

__all__ = [
    "bootstrap_metric",
    "calc_maj_val",
    "compute_data_metrics",
    "compute_throughout_metrics",
    "compute_timing_metrics",
    "process_validation_metrics",
    "reduce_metrics",
    "reward_trend_summary",
    "validation_metrics_to_log",
]


def reduce_metrics(metrics: dict[str, list[Any]]) -> dict[str, float]:
    """Mean of each list of per-micro-batch values: ``{"loss": [1, 2]} -> {"loss": 1.5}``."""
    return {key: float(np.mean(values)) for key, values in metrics.items()}


def reward_trend_summary(step_scores: Sequence[float]) -> str:
    """One line comparing the mean training reward of the first and the last quarter of the steps.

    With fewer than 4 steps a quarter is one step. ``[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]`` gives
    first quarter (steps 1-2) 0.15 and last quarter (steps 7-8) 0.75.
    """
    num_steps = len(step_scores)
    if num_steps == 0:
        return "Mean training reward: no steps were run."
    quarter = max(1, num_steps // 4)
    first, last = float(np.mean(step_scores[:quarter])), float(np.mean(step_scores[-quarter:]))
    return (
        f"Mean training reward: first quarter (steps 1-{quarter}) {first:.4f}, "
        f"last quarter (steps {num_steps - quarter + 1}-{num_steps}) {last:.4f}, change {last - first:+.4f}"
    )


def _lengths(batch) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """Per-sample prompt and response token counts (float) and the padded prompt / response widths."""
    response_width = batch.batch["responses"].shape[-1]
    attention_mask = batch.batch["attention_mask"]
    prompt_mask = attention_mask[:, :-response_width]
    if "response_mask" in batch.batch.keys():
        response_mask = batch.batch["response_mask"]
    else:
        response_mask = attention_mask[:, -response_width:]
    return prompt_mask.sum(-1).float(), response_mask.sum(-1).float(), prompt_mask.shape[-1], response_width


def _summary(prefix: str, values: torch.Tensor) -> dict[str, float]:
    """``{prefix}/mean``, ``/max`` and ``/min`` of a 1-D tensor (0.0 for an empty one)."""
    if values.numel() == 0:
        return {f"{prefix}/mean": 0.0, f"{prefix}/max": 0.0, f"{prefix}/min": 0.0}
    values = values.detach().float()
    return {
        f"{prefix}/mean": values.mean().item(),
        f"{prefix}/max": values.max().item(),
        f"{prefix}/min": values.min().item(),
    }


def compute_data_metrics(batch, use_critic: bool = True) -> dict[str, float]:
    """Batch statistics after the advantage step.

    ``critic/score`` and ``critic/rewards`` are over per-sequence sums of ``token_level_scores`` /
    ``token_level_rewards``; ``critic/advantages``, ``critic/returns`` (and ``critic/values`` with a critic)
    are over the valid response tokens (``response_mask``). ``critic/vf_explained_var`` is
    ``1 - Var(returns - values) / (Var(returns) + 1e-5)`` with unbiased variances. Length metrics count
    tokens per sample; ``clip_ratio`` is the share of samples that hit the padded width.
    """
    response_mask = batch.batch["response_mask"].bool()
    prompt_length, response_length, prompt_width, response_width = _lengths(batch)

    metrics: dict[str, float] = {}
    metrics.update(_summary("critic/score", batch.batch["token_level_scores"].sum(-1)))
    metrics.update(_summary("critic/rewards", batch.batch["token_level_rewards"].sum(-1)))
    metrics.update(_summary("critic/advantages", torch.masked_select(batch.batch["advantages"], response_mask)))
    valid_returns = torch.masked_select(batch.batch["returns"], response_mask)
    metrics.update(_summary("critic/returns", valid_returns))
    if use_critic:
        valid_values = torch.masked_select(batch.batch["values"], response_mask)
        metrics.update(_summary("critic/values", valid_values))
        return_diff_var = torch.var(valid_returns.float() - valid_values.float())
        return_var = torch.var(valid_returns.float())
        metrics["critic/vf_explained_var"] = (1.0 - return_diff_var / (return_var + 1e-5)).item()

    metrics.update(_summary("response_length", response_length))
    metrics["response_length/clip_ratio"] = torch.eq(response_length, response_width).float().mean().item()
    metrics.update(_summary("prompt_length", prompt_length))
    metrics["prompt_length/clip_ratio"] = torch.eq(prompt_length, prompt_width).float().mean().item()
    return metrics


def compute_timing_metrics(batch, timing_raw: dict[str, float]) -> dict[str, float]:
    """``timing_s/{phase}`` as measured, and ``timing_per_token_ms/{phase}`` for the phases that scale with tokens.

    Generation is divided by the response tokens; ref, values, adv and the updates by all (prompt + response)
    tokens of the batch.
    """
    prompt_length, response_length, _, _ = _lengths(batch)
    num_response_tokens = response_length.sum().item()
    num_overall_tokens = prompt_length.sum().item() + num_response_tokens
    tokens_per_phase = {"gen": num_response_tokens}
    tokens_per_phase.update(
        {name: num_overall_tokens for name in ("ref", "values", "adv", "update_critic", "update_actor")}
    )
    metrics = {f"timing_s/{name}": float(seconds) for name, seconds in timing_raw.items()}
    for name in tokens_per_phase.keys() & timing_raw.keys():
        if tokens_per_phase[name] > 0:
            metrics[f"timing_per_token_ms/{name}"] = timing_raw[name] * 1000.0 / tokens_per_phase[name]
    return metrics


def compute_throughout_metrics(batch, timing_raw: dict[str, float], n_gpus: int) -> dict[str, float]:
    """``perf/total_num_tokens`` (prompt + response tokens of the step), ``perf/time_per_step`` and
    ``perf/throughput`` = tokens / (step seconds * number of devices). (verl's function name, typo included.)"""
    if "global_token_num" in batch.meta_info:
        total_num_tokens = float(sum(batch.meta_info["global_token_num"]))
    else:
        total_num_tokens = float(batch.batch["attention_mask"].sum().item())
    step_seconds = float(timing_raw["step"])
    return {
        "perf/total_num_tokens": total_num_tokens,
        "perf/time_per_step": step_seconds,
        "perf/throughput": total_num_tokens / (step_seconds * max(n_gpus, 1)),
    }


def bootstrap_metric(
    data: Sequence[Any],
    subset_size: int,
    reduce_fns: Sequence[Callable[[list[Any]], float]],
    n_bootstrap: int = 1000,
    seed: int = 42,
) -> list[tuple[float, float]]:
    """Mean and std over ``n_bootstrap`` resamples (with replacement, size ``subset_size``) of each reduce_fn.

    Resampling uses ``np.random.seed(seed)`` then ``np.random.choice``, as verl does, so the numbers match.
    """
    np.random.seed(seed)
    per_fn: list[list[float]] = [[] for _ in reduce_fns]
    for _ in range(n_bootstrap):
        indices = np.random.choice(len(data), size=subset_size, replace=True)
        subset = [data[i] for i in indices]
        for values, reduce_fn in zip(per_fn, reduce_fns):
            values.append(reduce_fn(subset))
    return [(float(np.mean(values)), float(np.std(values))) for values in per_fn]


def calc_maj_val(data: list[dict[str, Any]], vote_key: str, val_key: str) -> float:
    """Value of the first sample whose ``vote_key`` answer is the most frequent (ties: first seen answer)."""
    vote_to_vals: dict[Any, list[Any]] = defaultdict(list)
    for item in data:
        vote_to_vals[item[vote_key]].append(item[val_key])
    majority = max(vote_to_vals, key=lambda vote: len(vote_to_vals[vote]))
    return vote_to_vals[majority][0]


def _subset_sizes(n_resps: int) -> list[int]:
    """2, 4, 8, ... below ``n_resps``, then ``n_resps`` itself."""
    sizes, size = [], 2
    while size < n_resps:
        sizes.append(size)
        size *= 2
    sizes.append(n_resps)
    return sizes


def _prompt_metrics(var_vals: list[float], preds: list[Any] | None, seed: int) -> dict[str, float]:
    n_resps = len(var_vals)
    metric = {f"mean@{n_resps}": float(np.mean(var_vals))}
    if n_resps == 1:
        return metric
    metric[f"std@{n_resps}"] = float(np.std(var_vals))
    for size in _subset_sizes(n_resps):
        (best_mean, best_std), (worst_mean, worst_std) = bootstrap_metric(
            var_vals, subset_size=size, reduce_fns=[np.max, np.min], seed=seed
        )
        metric[f"best@{size}/mean"], metric[f"best@{size}/std"] = best_mean, best_std
        metric[f"worst@{size}/mean"], metric[f"worst@{size}/std"] = worst_mean, worst_std
        if preds is not None:
            votes = [{"val": val, "pred": pred} for val, pred in zip(var_vals, preds)]
            [(maj_mean, maj_std)] = bootstrap_metric(
                votes, subset_size=size, reduce_fns=[partial(calc_maj_val, vote_key="pred", val_key="val")], seed=seed
            )
            metric[f"maj@{size}/mean"], metric[f"maj@{size}/std"] = maj_mean, maj_std
    return metric


def process_validation_metrics(
    data_sources: Sequence[str], sample_inputs: Sequence[str], infos_dict: dict[str, list[Any]], seed: int = 42
) -> dict[str, dict[str, dict[str, float]]]:
    """Per data source, per variable, per metric: the mean over prompts of each prompt's metric.

    ``sample_inputs[i]`` identifies the prompt of sample ``i`` (its N responses share it); ``infos_dict``
    maps a variable name (``"reward"``, ``"acc"``, ...) to one value per sample. String-valued variables
    are skipped; a ``"pred"`` variable (the extracted answer) enables maj@k.
    Returns ``{data_source: {var_name: {"mean@N": ..., "best@k/mean": ..., ...}}}``.
    """
    grouped: dict[str, dict[str, dict[str, list[Any]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for i, (data_source, prompt) in enumerate(zip(data_sources, sample_inputs)):
        for var_name, values in infos_dict.items():
            grouped[data_source][prompt][var_name].append(values[i])

    per_prompt: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for data_source, prompts in grouped.items():
        for var_to_vals in prompts.values():
            preds = var_to_vals.get("pred")
            for var_name, var_vals in var_to_vals.items():
                if not var_vals or isinstance(var_vals[0], str) or var_name == "pred":
                    continue
                for metric_name, value in _prompt_metrics(var_vals, preds, seed).items():
                    per_prompt[data_source][var_name][metric_name].append(value)

    return {
        data_source: {
            var_name: {metric_name: float(np.mean(values)) for metric_name, values in metrics.items()}
            for var_name, metrics in var_metrics.items()
        }
        for data_source, var_metrics in per_prompt.items()
    }


def validation_metrics_to_log(data_src2var2metric2val: dict[str, dict[str, dict[str, float]]]) -> dict[str, float]:
    """Flatten validation metrics into ``val-core/{source}/{var}/{metric}`` and ``val-aux/...`` keys.

    The core variables are ``reward`` (the summed token-level score) and ``acc`` when the reward function
    reports it (verl makes ``acc`` core when present, else ``reward``; both are core here so that
    ``val-core/{source}/reward/mean@N`` is always logged). Their mean / maj / best metrics at the largest N go
    to ``val-core``, everything else to ``val-aux``.
    """
    metric_dict: dict[str, float] = {}
    for data_source, var2metric2val in data_src2var2metric2val.items():
        for var_name, metric2val in var2metric2val.items():
            n_max = max(int(name.split("@")[-1].split("/")[0]) for name in metric2val)
            for metric_name, value in metric2val.items():
                is_core = (
                    var_name in ("reward", "acc")
                    and metric_name.startswith(("mean", "maj", "best"))
                    and f"@{n_max}" in metric_name
                )
                section = "val-core" if is_core else "val-aux"
                metric_dict[f"{section}/{data_source}/{var_name}/{metric_name}"] = value
    return metric_dict
