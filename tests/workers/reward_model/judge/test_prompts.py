"""The judge's chat from the template, and the template checks run at config validation."""

from __future__ import annotations

from verl.workers.config.reward_model import DEFAULT_JUDGE_TEMPLATE
from verl.workers.reward_model.judge.prompts import JudgeSample, judge_messages, last_user_message, template_errors


def test_messages_fill_every_placeholder():
    sample = JudgeSample(prompt="2+2?", response="4", ground_truth=4, data_source="math")
    template = "[{data_source}] Q: {prompt} A: {response} (truth {ground_truth}) {{literal}}"
    assert judge_messages(sample, template, None) == [
        {"role": "user", "content": "[math] Q: 2+2? A: 4 (truth 4) {literal}"}
    ]
    with_system = judge_messages(sample, "{response}", "You grade.")
    assert with_system == [{"role": "system", "content": "You grade."}, {"role": "user", "content": "4"}]
    assert judge_messages(JudgeSample("q", "r"), "{ground_truth}|{response}", None)[0]["content"] == "|r"


def test_template_errors():
    assert template_errors(DEFAULT_JUDGE_TEMPLATE) == []
    assert any("{question}" in e for e in template_errors("{question} {response}"))
    assert any("no {response}" in e for e in template_errors("only {prompt}"))
    assert any("not a valid format string" in e for e in template_errors("{response} {"))
    assert all("reward_model.judge.prompt_template" in e for e in template_errors("{0} {x}"))


def test_last_user_message():
    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    assert last_user_message(chat) == "b"
    assert last_user_message([{"role": "system", "content": "s"}]) is None
