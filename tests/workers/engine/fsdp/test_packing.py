"""The text pack's boundaries stay out of a vision tower (issue 21): transformers 5.17's Qwen2-VL forwards the
model call's ``**kwargs`` (``cu_seq_lens_q/k``, ``max_length_q/k`` of the TEXT pack) into ``model.visual``; the
vision attention then ran the causal varlen kernel with the text boundaries over the image patches (an illegal
memory access on CUDA, silently wrong on CPU). transformers 5.19 filters them itself, so the test calls the
vision tower with them the way 5.17 does."""

from __future__ import annotations

import pytest
import torch

from tests.support.models import tiny_vlm_path


@pytest.fixture(scope="module")
def vision_inputs():
    from verl.workers.config import HFModelConfig
    from verl.workers.engine.fsdp.model_builder import build_module

    module = build_module(HFModelConfig(path=tiny_vlm_path("qwen2_vl")), "ref", torch.float32).eval()
    config = module.config.vision_config
    grid = torch.tensor([[1, 4, 4], [1, 2, 4]])  # two images: 16 and 8 patches
    patches = torch.randn(
        24,
        config.in_channels * config.temporal_patch_size * config.patch_size**2,
        generator=torch.Generator().manual_seed(0),
    )
    return module, patches, grid


def _bidirectional_per_image_reference(module, patches, grid) -> torch.Tensor:
    """The vision tower run on each image alone with transformers' sdpa attention (non-causal, no varlen)."""
    visual = module.model.visual
    saved = visual.config._attn_implementation
    visual.config._attn_implementation = "sdpa"
    try:
        outs, start = [], 0
        for thw in grid:
            count = int(thw.prod())
            outs.append(visual(patches[start : start + count], grid_thw=thw[None]).pooler_output)
            start += count
    finally:
        visual.config._attn_implementation = saved
    return torch.cat(outs)


def test_text_pack_boundaries_do_not_reach_the_vision_tower(vision_inputs):
    module, patches, grid = vision_inputs
    assert module.model.visual.config._attn_implementation == "verl_varlen"
    # a text pack of 3 sequences, 40 tokens: longer than the 24 patches, boundaries inside the first image
    text_cu = torch.tensor([0, 10, 25, 40], dtype=torch.int32)
    text_kwargs = {"cu_seq_lens_q": text_cu, "cu_seq_lens_k": text_cu, "max_length_q": 15, "max_length_k": 15}
    with torch.no_grad():
        got = module.model.visual(patches, grid_thw=grid, **text_kwargs).pooler_output
        expected = _bidirectional_per_image_reference(module, patches, grid)
    assert got.shape == expected.shape == (24 // 4, module.config.vision_config.hidden_size)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_the_hook_only_drops_the_packing_kwargs(vision_inputs):
    from verl.workers.engine.fsdp.packing import PACKING_KWARGS, _drop_packing_kwargs

    kwargs = {name: 1 for name in PACKING_KWARGS} | {"grid_thw": 2, "output_attentions": False}
    assert _drop_packing_kwargs(None, (), kwargs) == ((), {"grid_thw": 2, "output_attentions": False})
