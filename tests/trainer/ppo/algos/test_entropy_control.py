"""Skywork-OR1's adaptive entropy coefficient against a hand-stepped sequence."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from verl.trainer.ppo.algos.entropy_control import AdaptiveEntropyController


def _controller(initial=0.0, max_coef=0.003, delta=0.001, target=0.5):
    config = SimpleNamespace(target_entropy=target, max_ent_coef=max_coef, min_ent_coef=0.0, delta_ent_coef=delta)
    return AdaptiveEntropyController(config, initial)


def test_coefficient_rises_below_target_and_falls_above():
    controller = _controller()
    # entropy below the target: alpha_k = c_k, then c grows by delta (capped at max)
    alphas = [controller.step(0.3) for _ in range(5)]
    assert alphas == pytest.approx([0.0, 0.001, 0.002, 0.003, 0.003])
    # above the target: no bonus this step, c shrinks by delta (floored at min)
    alphas = [controller.step(0.9) for _ in range(4)]
    assert alphas == [0.0, 0.0, 0.0, 0.0]
    assert controller.coef == pytest.approx(0.0)


def test_entropy_at_target_keeps_the_coefficient_and_applies_it():
    controller = _controller(initial=0.002)
    assert controller.step(0.5) == pytest.approx(0.002)
    assert controller.coef == pytest.approx(0.002)


def test_initial_coefficient_is_clipped_and_state_round_trips():
    controller = _controller(initial=0.01)
    assert controller.coef == pytest.approx(0.003)
    restored = _controller()
    restored.load_state_dict(controller.state_dict())
    assert restored.step(0.1) == pytest.approx(0.003)
