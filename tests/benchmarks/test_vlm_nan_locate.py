"""The GPU NaN locator's two judges on hand-made cases: anomaly detection names the backward function that first
returns NaN (and the forward line that made it), and the device comparison reports magnitudes and relative
differences per module."""

from __future__ import annotations

import torch

from benchmarks.gpu.vlm_nan_locate import anomaly_forward_backward, compare_forward


def test_anomaly_names_the_function_whose_backward_is_nan():
    x = torch.tensor([0.0, 4.0], requires_grad=True)
    # forward 0 * sqrt(x) = [0, 0] is finite; backward d sqrt/dx at 0 is inf, times 0 -> NaN
    found = anomaly_forward_backward(lambda: (torch.sqrt(x) * 0.0).sum())
    assert found["loss"] == 0.0
    assert "SqrtBackward0" in found["anomaly_error"]
    assert found["forward_traceback"] and "test_vlm_nan_locate.py" in found["forward_traceback"][0]


def test_anomaly_is_quiet_for_a_finite_backward():
    x = torch.tensor([1.0, 4.0], requires_grad=True)
    found = anomaly_forward_backward(lambda: torch.sqrt(x).sum())
    assert found["anomaly_error"] is None and found["loss"] == 3.0
    assert torch.allclose(x.grad, torch.tensor([0.5, 0.25]))


def test_compare_forward_reports_image_and_text_positions_apart():
    cpu = {"layer": torch.tensor([[1.0, -2.0], [4.0, 0.5], [0.25, 0.0]])}
    cuda = {"layer": torch.tensor([[1.0, -2.0], [4.0, 1.5], [8.0, 0.0]])}
    image = torch.tensor([False, True, False])
    (row,) = compare_forward(cuda, cpu, image)
    assert row["cuda_max"] == 8.0 and row["cpu_max"] == 4.0 and row["cuda_finite"]
    assert row["rel_diff"] == (8.0 - 0.25) / 4.0
    assert row["cuda_image_max"] == 4.0 and row["cuda_text_max"] == 8.0
