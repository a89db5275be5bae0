"""``forward_log_probs(..., response_length=R)``: the output layer runs on the positions that predict a response
token alone, and the response slice (log-probs, entropy, every parameter gradient) is what the full forward gives."""

from __future__ import annotations

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import reference_log_probs, rollout_batch
from verl.workers.engine.fsdp.forward import forward_log_probs, keeps_logit_rows, response_head_rows
from verl.workers.engine.fsdp.packing import pack


def _model(arch: str = "llama"):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_path(arch), dtype=torch.float32)


def _watch_head(model) -> list[int]:
    """The number of rows each call of the model's output layer sees."""
    seen = []
    model.get_output_embeddings().register_forward_hook(lambda _m, args, _out: seen.append(args[0].shape[1]))
    return seen


def _log_probs(model, batch, **kwargs):
    return forward_log_probs(model, batch["input_ids"], batch["attention_mask"], batch["position_ids"], **kwargs)


def test_head_rows_by_hand():
    # S = 6, R = 3: the rows of columns 2..4 (S-R-1 .. S-2) that hold a token, in packed order
    attention_mask = torch.tensor([[0, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    packed = pack(attention_mask * 7, attention_mask, position_ids)
    # packed tokens: row 0 columns 1-4 -> 0..3, row 1 columns 0-5 -> 4..9
    assert response_head_rows(packed, attention_mask, 3).tolist() == [1, 2, 3, 6, 7, 8]


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_response_rows_give_the_full_forward_on_the_response(arch, fused):
    batch = rollout_batch(batch_size=4, prompt_length=7, response_length=5, seed=11)
    response_length = batch["responses"].shape[1]
    mask = batch["response_mask"].float()
    weights = torch.randn(mask.shape, generator=torch.Generator().manual_seed(1)) * mask
    results = {}
    for rows_only in (False, True):
        model = _model(arch)
        seen = _watch_head(model)
        log_probs, entropy = _log_probs(
            model,
            batch,
            temperature=0.7,
            calculate_entropy=True,
            use_fused_kernels=fused,
            response_length=response_length if rows_only else None,
        )
        response = slice(-response_length - 1, -1)
        ((log_probs[:, response] + 0.1 * entropy[:, response]) * weights).sum().backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters()}
        results[rows_only] = (log_probs.detach(), entropy.detach(), grads, seen)
    (lp, ent, grads, seen_all), (lp_rows, ent_rows, grads_rows, seen_rows) = results[False], results[True]
    # the output layer saw every token, then the response rows alone: the last prompt token and each response
    # token but the last column
    assert seen_all == [int(batch["attention_mask"].sum())]
    assert seen_rows == [int(batch["attention_mask"][:, -response_length - 1 : -1].sum())]
    valid = batch["attention_mask"][:, -response_length:].bool()
    response = slice(-response_length - 1, -1)
    torch.testing.assert_close(lp_rows[:, response][valid], lp[:, response][valid], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ent_rows[:, response][valid], ent[:, response][valid], atol=1e-5, rtol=1e-5)
    assert lp_rows[:, : -response_length - 1].abs().sum() == 0  # prompt rows skipped the head
    for name, grad in grads.items():
        scale = float(grad.abs().max())
        torch.testing.assert_close(grads_rows[name], grad, atol=1e-5 * scale + 1e-8, rtol=0, msg=name)


def test_response_rows_against_each_sequence_alone():
    """An independent reference: a plain forward of each unpadded sequence."""
    model = _model("llama")
    batch = rollout_batch(batch_size=5, prompt_length=6, response_length=4, seed=5)
    response_length = batch["responses"].shape[1]
    with torch.no_grad():
        log_probs, _ = _log_probs(model, batch, temperature=0.9, response_length=response_length)
        expected = reference_log_probs(model, batch, temperature=0.9)
    got = log_probs[:, -response_length - 1 : -1] * batch["response_mask"]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_models_without_logits_to_keep_run_the_full_head():
    model = _model("llama")
    assert keeps_logit_rows(model)

    class NoKeep(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, position_ids=None, use_cache=False, **attention):
            return self.inner(input_ids=input_ids, position_ids=position_ids, use_cache=use_cache, **attention)

        def get_output_embeddings(self):
            return self.inner.get_output_embeddings()

    wrapped = NoKeep(model)
    assert not keeps_logit_rows(wrapped)
    batch = rollout_batch(batch_size=3, seed=2)
    response_length = batch["responses"].shape[1]
    with torch.no_grad():
        full, _ = _log_probs(wrapped, batch, response_length=response_length)
        plain, _ = _log_probs(model, batch)
    torch.testing.assert_close(full, plain)


def test_device_types_outside_the_list_run_the_full_head(monkeypatch):
    from verl.workers.engine.fsdp import forward

    model = _model("llama")
    assert forward.head_rows_only(model, use_remove_padding=True, ulysses=None)  # the CPU is listed
    assert not forward.head_rows_only(model, use_remove_padding=False, ulysses=None)
    monkeypatch.setattr(forward, "RESPONSE_ROWS_DEVICES", ("cuda",))
    assert not forward.head_rows_only(model, use_remove_padding=True, ulysses=None)
    seen = _watch_head(model)
    batch = rollout_batch(batch_size=3, seed=4)
    with torch.no_grad():
        _log_probs(model, batch, response_length=batch["responses"].shape[1])
    assert seen == [int(batch["attention_mask"].sum())]
