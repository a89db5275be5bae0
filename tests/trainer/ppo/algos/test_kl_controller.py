import pytest
from omegaconf import OmegaConf

from verl.trainer.ppo.core_algos import AdaptiveKLController, FixedKLController, get_kl_controller


def test_fixed_controller_never_changes():
    controller = FixedKLController(kl_coef=0.05)
    controller.update(current_kl=100.0, n_steps=64)
    assert controller.value == 0.05


def test_adaptive_controller_hand_worked():
    controller = AdaptiveKLController(init_kl_coef=0.1, target_kl=1.0, horizon=100)
    controller.update(current_kl=2.0, n_steps=10)  # error clipped to +0.2: 0.1 * (1 + 0.2 * 10 / 100)
    assert controller.value == pytest.approx(0.102)
    controller.update(current_kl=0.9, n_steps=50)  # error -0.1: * (1 - 0.1 * 0.5)
    assert controller.value == pytest.approx(0.102 * 0.95)


def test_get_kl_controller_from_omegaconf():
    fixed = get_kl_controller(OmegaConf.create({"type": "fixed", "kl_coef": 0.002}))
    assert isinstance(fixed, FixedKLController) and fixed.value == 0.002
    adaptive = get_kl_controller(
        OmegaConf.create({"type": "adaptive", "kl_coef": 0.01, "target_kl": 0.5, "horizon": 1000})
    )
    assert isinstance(adaptive, AdaptiveKLController) and (adaptive.target, adaptive.horizon) == (0.5, 1000)


def test_unknown_controller_type_lists_the_known_ones():
    with pytest.raises(ValueError, match="adaptive"):
        get_kl_controller(OmegaConf.create({"type": "pid", "kl_coef": 0.1}))
