"""Score a parquet written by ``main_generation`` and report mean@n and pass@k per data source.

    python -m verl.trainer.main_eval data.path=gen.parquet [custom_reward_function.path=my_reward.py]

Each response of a row is scored with ``custom_reward_function`` (when its ``path`` is set) or
``verl.utils.reward_score.default_compute_score(data_source, solution_str, ground_truth, extra_info)``; a
returned dict contributes its ``score``. A response is correct when its score is above ``pass_threshold``.
For a data source with prompts ``i`` of ``n_i`` responses, ``c_i`` of them correct:

- ``mean@n``: the mean over prompts of the mean score of their responses;
- ``pass@k``: the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on
  Code", Eq. 1), ``mean_i [1 - C(n_i - c_i, k) / C(n_i, k)]``, for ``k = 1, 2, 4, ...`` up to the smallest
  ``n_i`` (and that ``n`` itself).

The report is printed and written as json (``output_path``, default ``<data.path stem>_eval.json``).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable
from math import comb
from typing import Any

import hydra
import numpy as np
from omegaconf import DictConfig

from verl.trainer.config.generation import EvaluationConfig
from verl.trainer.config.sft import validate_typed


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of ``k`` responses drawn without replacement from ``n`` (``c`` correct)
    is correct: ``1 - C(n - c, k) / C(n, k)``."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} responses per prompt, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def k_values(n: int) -> list[int]:
    """``1, 2, 4, ...`` below ``n``, then ``n``."""
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    return ks + [n]


def summarize(scores_by_prompt: list[list[float]], pass_threshold: float) -> dict[str, float]:
    """``num_prompts``, ``n``, ``mean@n`` and ``pass@k`` of one data source's per-prompt score lists."""
    n_min = min(len(scores) for scores in scores_by_prompt)
    if n_min == 0:
        raise ValueError("a prompt has no responses; every row needs at least one response")
    report: dict[str, float] = {"num_prompts": len(scores_by_prompt), "n": n_min}
    report[f"mean@{n_min}"] = float(np.mean([np.mean(scores) for scores in scores_by_prompt]))
    for k in k_values(n_min):
        estimates = [pass_at_k(len(s), sum(x > pass_threshold for x in s), k) for s in scores_by_prompt]
        report[f"pass@{k}"] = float(np.mean(estimates))
    return report


def load_score_fn(config: EvaluationConfig) -> Callable[..., Any]:
    """The custom reward function when ``custom_reward_function.path`` is set, else ``default_compute_score``."""
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.reward_score import default_compute_score

    return get_custom_reward_fn(config) or default_compute_score


def _score_value(result: Any) -> float:
    return float(result["score"] if isinstance(result, dict) else result)


def _plain(value: Any) -> Any:
    """pyarrow rows hold lists and dicts already; numpy arrays (pandas-written lists) become lists."""
    return value.tolist() if isinstance(value, np.ndarray) else value


def score_rows(rows: list[dict], config: EvaluationConfig, score_fn: Callable) -> dict[str, list[list[float]]]:
    """Per data source, the list of per-prompt score lists."""
    data = config.data
    by_source: dict[str, list[list[float]]] = defaultdict(list)
    for index, row in enumerate(rows):
        for key in (data.response_key, data.data_source_key, data.reward_model_key):
            if key not in row:
                raise KeyError(f"row {index} of {data.path!r} has no column {key!r} (columns: {sorted(row)})")
        responses = _plain(row[data.response_key])
        if isinstance(responses, str):
            responses = [responses]
        ground_truth = row[data.reward_model_key]["ground_truth"]
        scores = [
            _score_value(
                score_fn(
                    data_source=row[data.data_source_key],
                    solution_str=response,
                    ground_truth=ground_truth,
                    extra_info=row.get("extra_info"),
                )
            )
            for response in responses
        ]
        by_source[row[data.data_source_key]].append(scores)
    return dict(by_source)


def run_eval(config: DictConfig | EvaluationConfig) -> dict[str, dict[str, float]]:
    """Score ``data.path`` and return (print, write) ``{data_source: {"mean@n", "pass@k", ...}}``."""
    import pyarrow.parquet as pq

    config = validate_typed(config, EvaluationConfig)
    path = os.path.expanduser(config.data.path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"data.path={config.data.path!r} does not exist")
    rows = pq.read_table(path).to_pylist()
    by_source = score_rows(rows, config, load_score_fn(config))
    report = {source: summarize(scores, config.pass_threshold) for source, scores in sorted(by_source.items())}
    output_path = os.path.expanduser(config.output_path) if config.output_path else path.removesuffix(".parquet")
    if not config.output_path:
        output_path += "_eval.json"
    with open(output_path, "w") as handle:
        json.dump(report, handle, indent=2)
    print(json.dumps(report, indent=2))
    print(f"wrote {output_path}")
    return report


@hydra.main(config_path="config", config_name="evaluation", version_base=None)
def main(config: DictConfig) -> None:
    run_eval(config)


if __name__ == "__main__":
    main()
