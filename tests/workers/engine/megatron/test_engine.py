"""The Megatron engine + actor on 2 gloo ranks (CPU) against plain single-process references.

For tensor parallel (TP=2, fixed and token-budget micro-batches), pipeline parallel (PP=2, tied embeddings split
across stages), data parallel with the ZeRO-1 optimizer (DP=2) and interleaved virtual stages (PP=2 x VPP=2):

* log-probs and entropy equal per-sequence Hugging Face forwards without padding;
* one ``update_policy`` step equals test_dp_actor's hand-written PPO step: same loss and grad norm, clipped
  gradients within float32 summation error, and the AdamW step (checked as test_dp_actor does);
* Qwen2 (QKV bias, untied head) log-probs at TP=2, dynamic batch size.
"""

from __future__ import annotations

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.actor.test_dp_actor import (
    TIED,
    assert_adamw_step_matches,
    assert_grads_match,
    make_update_batch,
    reference_step,
)
from tests.workers.engine.fsdp.distributed import reference_log_probs, rollout_batch, run_on_ranks
from tests.workers.engine.megatron.helpers import megatron_actor, run_actor_variant

pytest.importorskip("megatron.core")

LAYOUTS = {
    "tp2": dict(tp=2, micro=2),
    "tp2-dynamic": dict(tp=2, dynamic=True),
    "pp2": dict(pp=2, micro=1),
    "dp2-zero": dict(micro=2, use_distributed_optimizer=True),
}


def _variants_rank(rank, world, path, batch, layouts):
    return [run_actor_variant(rank, world, path, batch, layout) for layout in layouts]


def _reference_entropy(model, batch) -> torch.Tensor:
    response_length = batch["responses"].shape[1]
    out = torch.zeros(batch["responses"].shape)
    for row in range(batch["input_ids"].shape[0]):
        ids = batch["input_ids"][row][batch["attention_mask"][row].bool()]
        log_softmax = torch.log_softmax(model(input_ids=ids[None]).logits[0, :-1].float(), dim=-1)
        entropy = -(log_softmax.exp() * log_softmax).sum(-1)
        n_resp = int(batch["response_mask"][row].sum())
        out[row, :n_resp] = entropy[len(ids) - 1 - n_resp :]
    assert out.shape[1] == response_length
    return out


def _check_against_reference(path, batch, results, reference):
    """``results`` are every rank's outputs of one layout; ``reference`` is ``reference_step``'s."""
    from transformers import AutoModelForCausalLM

    ref_pg_loss, ref_grad_norm, ref_grads, ref_before, ref_params = reference
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        expected_log_probs = reference_log_probs(model, batch)
        expected_entropy = _reference_entropy(model, batch)
    mask = batch["response_mask"].bool()
    collected = sorted((r for r in results if r["collect"]), key=lambda r: r["dp_rank"])
    log_probs = torch.cat([r["log_probs"] for r in collected])
    entropys = torch.cat([r["entropys"] for r in collected])
    torch.testing.assert_close(log_probs[mask], expected_log_probs[mask], atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(entropys[mask], expected_entropy[mask], atol=2e-5, rtol=1e-5)
    assert torch.all(log_probs[~mask] == 0)
    for result in results:  # every rank reports the same metrics
        metrics = result["metrics"]
        assert metrics["actor/pg_loss"][0] == pytest.approx(ref_pg_loss, rel=1e-4, abs=1e-6)
        assert metrics["actor/grad_norm"][0] == pytest.approx(ref_grad_norm, rel=1e-4)
    rank0 = results[0]
    for name, expected in ref_grads.items():
        if name in rank0["grads"]:
            assert_grads_match(name, rank0["grads"][name], expected)
    for name, expected in ref_params.items():
        stored = TIED.get(name, name) if name not in rank0["params"] else name
        actor_grad = rank0["grads"].get(TIED.get(name, name))
        assert_adamw_step_matches(
            name, rank0["params"][stored], expected, actor_grad, ref_grads.get(name), ref_before[name]
        )


@pytest.fixture(scope="module")
def llama_setup():
    path = tiny_model_path("llama")
    batch = make_update_batch(path)
    return path, batch, reference_step(path, batch)


def test_tp_pp_dp_log_probs_and_update_match_reference(llama_setup):
    path, batch, reference = llama_setup
    per_rank = run_on_ranks(_variants_rank, 2, path, batch, list(LAYOUTS.values()))
    for index, name in enumerate(LAYOUTS):
        results = [rank_results[index] for rank_results in per_rank]
        try:
            _check_against_reference(path, batch, results, reference)
        except AssertionError as exc:
            raise AssertionError(f"layout {name}: {exc}") from exc


@pytest.mark.slow
def test_interleaved_virtual_pipeline_matches_reference():
    path = tiny_model_path("llama", num_layers=4)
    batch = make_update_batch(path)
    reference = reference_step(path, batch)
    per_rank = run_on_ranks(_variants_rank, 2, path, batch, [dict(pp=2, vpp=2, micro=2)])
    _check_against_reference(path, batch, [r[0] for r in per_rank], reference)


def _qwen_rank(rank, world, path, batch):
    from verl.protocol import DataProto

    engine, actor = megatron_actor(path, tp=2)
    data = DataProto.from_dict(tensors=batch, meta_info={"temperature": 0.7})
    data.meta_info.update(micro_batch_size=None, use_dynamic_bsz=True, max_token_len=24)
    log_probs, _ = actor.compute_log_prob(data)
    return log_probs


def test_qwen2_tensor_parallel_dynamic_batch_log_probs():
    from transformers import AutoModelForCausalLM

    path = tiny_model_path("qwen2")
    batch = rollout_batch(batch_size=8)
    per_rank = run_on_ranks(_qwen_rank, 2, path, batch)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        expected = reference_log_probs(model, batch, temperature=0.7)
    mask = batch["response_mask"].bool()
    for log_probs in per_rank:
        torch.testing.assert_close(log_probs[mask], expected[mask], atol=2e-5, rtol=1e-5)
