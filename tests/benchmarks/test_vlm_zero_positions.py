"""The VLM zero-position probe's per-layer RMS against transformers' own hidden states of a tiny text model."""

from __future__ import annotations

import torch

from benchmarks.gpu.vlm_zero_positions import layer_input_rms
from tests.support.models import tiny_model_path


def test_layer_input_rms_equals_the_rms_of_transformers_hidden_states():
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path("llama"), dtype=torch.float32).eval()
    ids = torch.randint(3, model.config.vocab_size, (1, 12), generator=torch.Generator().manual_seed(0))
    per_layer = layer_input_rms(model.model.layers, lambda: model(ids))
    with torch.no_grad():
        hidden = model(ids, output_hidden_states=True).hidden_states  # embedding output, then each layer's output
    assert len(per_layer) == model.config.num_hidden_layers
    for layer, rms in enumerate(per_layer):
        expected = hidden[layer][0].pow(2).mean(-1).sqrt()  # (T,): the input of layer `layer`
        torch.testing.assert_close(rms, expected, rtol=1e-5, atol=1e-7)
