"""AdamW's implementation by default: fused on CUDA parameters, torch's default elsewhere, and what
``override_optimizer_config`` says always wins (verl.workers.engine.fsdp.optim)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from verl.workers.config import OptimConfig
from verl.workers.engine.fsdp.optim import build_optimizer, default_implementation

CUDA = SimpleNamespace(device=torch.device("cuda", 0))  # only the device is read; no GPU needed
CPU = torch.zeros(2)


def test_fused_only_when_every_parameter_is_on_cuda():
    assert default_implementation([CUDA, CUDA], {"eps": 1e-6}) == {"eps": 1e-6, "fused": True}
    assert default_implementation([CUDA, CPU], {}) == {}  # offloaded or mixed: torch's default
    assert default_implementation([CPU], {}) == {}


@pytest.mark.parametrize("overrides", [{"fused": False}, {"foreach": True}, {"foreach": False}])
def test_the_users_choice_of_implementation_is_kept(overrides):
    assert default_implementation([CUDA], overrides) == overrides


def test_cpu_optimizer_keeps_torchs_default_and_the_users_extra_keys():
    optimizer = build_optimizer(nn.Linear(3, 2), OptimConfig(lr=1e-3, override_optimizer_config={"eps": 1e-5}))
    assert not optimizer.defaults["fused"]
    assert optimizer.defaults["eps"] == 1e-5


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_optimizer_is_fused_and_steps_like_the_unfused_one():
    torch.manual_seed(0)
    plain = nn.Linear(8, 4).cuda()
    fused = nn.Linear(8, 4).cuda()
    fused.load_state_dict(plain.state_dict())
    config = OptimConfig(lr=1e-2)
    opt_fused = build_optimizer(fused, config)
    opt_plain = build_optimizer(plain, OptimConfig(lr=1e-2, override_optimizer_config={"fused": False}))
    assert opt_fused.defaults["fused"] and not opt_plain.defaults["fused"]
    x = torch.randn(16, 8, device="cuda")
    for model, opt in ((plain, opt_plain), (fused, opt_fused)):
        model(x).square().sum().backward()
        opt.step()
    torch.testing.assert_close(fused.weight, plain.weight)
