"""Loading custom reward functions and reward managers from the config; compute_reward's outputs."""

import pytest
import torch
from omegaconf import OmegaConf
from transformers import AutoTokenizer

from tests.support.models import smollm2_path
from tests.workers.reward_manager.batch_builder import expected_tensor, make_batch
from verl.trainer.ppo.reward import compute_reward, get_custom_reward_fn, load_reward_manager
from verl.workers.reward_manager import DAPORewardManager, NaiveRewardManager

CUSTOM_FILE = """
def my_score(data_source, solution_str, ground_truth, extra_info=None, scale=1.0):
    return {"score": scale * float(ground_truth in solution_str), "length": len(solution_str)}

def batch_score(data_sources, solution_strs, ground_truths, extra_infos):
    return [float(g in s) for s, g in zip(solution_strs, ground_truths)]

def two_args(solution, truth):
    return 1.0

def anything(**kwargs):
    return 0.25

NOT_A_FUNCTION = 3
"""


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(smollm2_path())


@pytest.fixture
def reward_file(tmp_path):
    path = tmp_path / "my_reward.py"
    path.write_text(CUSTOM_FILE)
    return str(path)


def make_config(path=None, name="compute_score", manager="naive", reward_kwargs=None, manager_kwargs=None):
    return OmegaConf.create(
        {
            "data": {"reward_fn_key": "data_source"},
            "reward_model": {"reward_manager": manager, "reward_kwargs": manager_kwargs or {}},
            "custom_reward_function": {"path": path, "name": name, "reward_kwargs": reward_kwargs or {}},
        }
    )


def test_no_custom_function_gives_none():
    assert get_custom_reward_fn(make_config()) is None


def test_custom_function_loads_with_bound_kwargs(reward_file):
    fn = get_custom_reward_fn(make_config(reward_file, "my_score", reward_kwargs={"scale": 3.0}))
    assert fn(data_source="x", solution_str="a 7", ground_truth="7", extra_info=None) == {"score": 3.0, "length": 3}
    assert get_custom_reward_fn(make_config(reward_file, "anything"))(data_source="x") == 0.25


def test_missing_file_names_the_key(tmp_path):
    with pytest.raises(FileNotFoundError, match="custom_reward_function.path"):
        get_custom_reward_fn(make_config(str(tmp_path / "nope.py"), "f"))


def test_missing_function_names_the_key_and_lists_functions(reward_file):
    with pytest.raises(AttributeError, match=r"custom_reward_function.name='nope'.*my_score"):
        get_custom_reward_fn(make_config(reward_file, "nope"))
    with pytest.raises(AttributeError, match="NOT_A_FUNCTION"):
        get_custom_reward_fn(make_config(reward_file, "NOT_A_FUNCTION"))


def test_wrong_signature_is_refused_on_load(reward_file):
    with pytest.raises(TypeError, match="two_args.*data_source=.*solution_str="):
        get_custom_reward_fn(make_config(reward_file, "two_args"))
    with pytest.raises(TypeError, match="unknown_kwarg"):
        get_custom_reward_fn(make_config(reward_file, "two_args", reward_kwargs={"unknown_kwarg": 1}))
    with pytest.raises(TypeError, match="data_sources="):  # the batch manager passes plural names
        get_custom_reward_fn(make_config(reward_file, "my_score", manager="batch"))
    assert get_custom_reward_fn(make_config(reward_file, "batch_score", manager="batch")) is not None


def test_load_reward_manager_and_compute_reward(tokenizer, reward_file):
    config = make_config(reward_file, "my_score", reward_kwargs={"scale": 2.0})
    manager = load_reward_manager(config, tokenizer, num_examine=0)
    assert isinstance(manager, NaiveRewardManager)
    data, lengths = make_batch(tokenizer, ["it is 7", "it is 8"], ["7", "7"], data_source="custom")
    reward_tensor, extra = compute_reward(data, manager)
    torch.testing.assert_close(reward_tensor, expected_tensor([2.0, 0.0], lengths))
    assert extra == {"length": [7, 7], "score": [2.0, 0.0]}


def test_default_scores_and_manager_kwargs(tokenizer):
    cfg = {"enable": True, "len": 4, "penalty_factor": 1.0, "log": False}
    config = make_config(manager="dapo", manager_kwargs={"max_resp_len": 24, "overlong_buffer_cfg": cfg})
    manager = load_reward_manager(config, tokenizer, num_examine=0)
    assert isinstance(manager, DAPORewardManager) and manager.buffer_len == 4
    data, lengths = make_batch(tokenizer, ["#### 72"], ["72"])
    reward_tensor, _ = compute_reward(data, manager)
    torch.testing.assert_close(reward_tensor, expected_tensor([1.0], lengths))


def test_unknown_manager_lists_registered(tokenizer):
    with pytest.raises(ValueError, match="naive"):
        load_reward_manager(make_config(manager="fancy"), tokenizer, num_examine=0)


def test_dapo_settings_default_from_overlong_buffer_and_max_response_length(tokenizer):
    config = make_config(manager="dapo")
    config.reward_model.overlong_buffer = {"enable": True, "len": 8, "penalty_factor": 0.5, "log": True}
    config.data.max_response_length = 24
    manager = load_reward_manager(config, tokenizer, num_examine=0)
    assert (manager.max_resp_len, manager.buffer_len, manager.penalty_factor) == (24, 8, 0.5)
    naive = load_reward_manager(make_config(), tokenizer, num_examine=0)  # naive takes neither setting
    assert isinstance(naive, NaiveRewardManager)


def test_custom_function_from_a_file_runs_in_prime_workers(tokenizer, reward_file):
    config = make_config(reward_file, "my_score", manager="prime", manager_kwargs={"num_processes": 1, "timeout": 30})
    manager = load_reward_manager(config, tokenizer, num_examine=0)
    try:
        data, lengths = make_batch(tokenizer, ["it is 7", "it is 8"], ["7", "7"], data_source="custom")
        reward_tensor, extra = compute_reward(data, manager)
        torch.testing.assert_close(reward_tensor, expected_tensor([1.0, 0.0], lengths))
        assert extra["score_error"] == [0.0, 0.0] and extra["length"] == [7, 7]
    finally:
        manager.close()


def test_rows_in_order_follows_a_reorder():
    from verl.trainer.ppo.reward import rows_in_order

    scores = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
    extra = {"acc": [1, 0, 1], "partial": [5]}
    reordered, reordered_extra = rows_in_order(scores, extra, [2, 0, 1])  # current rows were originally 2, 0, 1
    torch.testing.assert_close(reordered, torch.tensor([[3.0, 0.0], [1.0, 0.0], [0.0, 2.0]]))
    assert reordered_extra == {"acc": [1, 1, 0]}


def test_async_reward_task_equals_the_inline_call_with_a_custom_function_from_a_file(tokenizer, reward_file):
    import ray

    from verl.trainer.ppo.reward import compute_reward_async, compute_reward_with_metrics

    manager = load_reward_manager(make_config(reward_file, "my_score"), tokenizer, num_examine=0)
    data, _ = make_batch(tokenizer, ["x 7", "no", "7"], ["7", "7", "7"])
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:  # the task's process cannot import the file's synthetic module: the function travels by value
        remote_scores, remote_extra, remote_metrics = ray.get(compute_reward_async(data, manager))
    finally:
        ray.shutdown()
    scores, extra, metrics = compute_reward_with_metrics(data, manager)
    torch.testing.assert_close(remote_scores, scores)
    assert remote_extra == extra and extra["length"] == [3, 2, 1] and remote_metrics == metrics == {}
