"""DataParallelPPOActor on FSDP2 over 2 gloo ranks against plain single-process references.

* log-probs (padded, remove-padding, dynamic batch size) equal per-sequence HF forwards without padding;
* one ``update_policy`` step equals a PPO step written out here by hand (clipped surrogate + entropy bonus
  + low-variance KL, token-mean over the whole mini-batch, grad clipping, AdamW) — same loss, grad norm and
  parameters — on 2 ranks and 1 rank, with several micro-batch splits and dynamic batch size;
* with Ulysses sequence parallelism (2 ranks, ``ulysses_sequence_parallel_size=2``, gradient checkpointing) the
  log-probs, entropy and the update equal the same single-process references (SP=1), for fixed and dynamic
  micro-batches.

The update is checked where the math determines it, so that it holds under any summation order (ranks,
micro-batches, threads, BLAS kernels). The clipped gradients just before the AdamW step must equal the reference's
within float32 summation error. Adam's first step moves an entry by ``lr * g / (|g| + eps)``, about
``lr * sign(g)`` once ``|g| >> eps``: where a gradient is a rounding error away from zero its sign, so ``+lr`` or
``-lr``, depends on the order. So the parameters must equal that step applied by hand to the actor's own
gradients everywhere, and equal the reference step where the gradient is well away from zero.
"""

from __future__ import annotations

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import counting_gathers, reference_log_probs, rollout_batch, run_on_ranks

LR, EPS, WD, CLIP, ENT, KL = 1e-3, 1e-6, 0.01, 0.2, 0.01, 0.1
BATCH = 8
# Each gradient entry is a float32 sum over a few hundred tokens: two summation orders differ by about
# n * 2^-24 ~ 1e-5 of the tensor's largest entry in the worst case (measured: 2e-6). GRAD_RTOL is that bound.
GRAD_RTOL = 2e-5
PARAM_ATOL = 2e-6
TIED = {"lm_head.weight": "model.embed_tokens.weight"}  # the tiny Llama ties its output layer to the embedding


def make_update_batch(model_path: str) -> dict[str, torch.Tensor]:
    """Rollout batch plus old/ref log-probs near the model's own and random advantages."""
    from transformers import AutoModelForCausalLM

    batch = rollout_batch(batch_size=BATCH)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    with torch.no_grad():
        current = reference_log_probs(model, batch)
    gen = torch.Generator().manual_seed(1)
    mask = batch["response_mask"].float()
    batch["old_log_probs"] = (current + 0.3 * torch.randn(current.shape, generator=gen)) * mask
    batch["ref_log_prob"] = (current + 0.2 * torch.randn(current.shape, generator=gen)) * mask
    batch["advantages"] = torch.randn(current.shape, generator=gen) * mask
    return batch


def reference_step(model_path: str, batch: dict[str, torch.Tensor]):
    """One PPO step in plain PyTorch: returns (pg_loss, grad_norm, clipped grads, params before and after)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    mask = batch["response_mask"].float()
    n_tokens = mask.sum()
    log_prob = torch.zeros(mask.shape)
    entropy = torch.zeros(mask.shape)
    rows_lp, rows_ent = [], []
    for row in range(BATCH):
        valid = batch["attention_mask"][row].bool()
        ids = batch["input_ids"][row][valid]
        logits = model(input_ids=ids[None]).logits[0, :-1].float()
        n_resp = int(mask[row].sum())
        logits = logits[len(ids) - 1 - n_resp :]
        log_softmax = torch.log_softmax(logits, dim=-1)
        rows_lp.append(log_softmax.gather(-1, ids[-n_resp:, None])[:, 0])
        rows_ent.append(-(log_softmax.exp() * log_softmax).sum(-1))
    log_prob = torch.stack([torch.nn.functional.pad(r, (0, mask.shape[1] - len(r))) for r in rows_lp])
    entropy = torch.stack([torch.nn.functional.pad(r, (0, mask.shape[1] - len(r))) for r in rows_ent])
    adv = batch["advantages"]
    ratio = torch.exp(log_prob - batch["old_log_probs"])
    surrogate = torch.maximum(-adv * ratio, -adv * ratio.clamp(1 - CLIP, 1 + CLIP))
    surrogate = torch.where(adv < 0, torch.minimum(surrogate, -adv * 3.0), surrogate)  # dual clip, c = 3
    pg_loss = (surrogate * mask).sum() / n_tokens
    entropy_mean = (entropy * mask).sum() / n_tokens
    delta = (batch["ref_log_prob"] - log_prob).clamp(-20, 20)
    kl = (torch.exp(delta) - delta - 1).clamp(-10, 10)  # k3 / low_var_kl (Schulman 2020)
    kl_loss = (kl * mask).sum() / n_tokens
    loss = pg_loss - ENT * entropy_mean + KL * kl_loss
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    grad_by_storage = {p.data_ptr(): p.grad.detach().clone() for p in model.parameters()}
    # keyed by state-dict name, so a tied weight (lm_head.weight = embed_tokens.weight) gets its parameter's grad
    grads = {k: grad_by_storage[v.data_ptr()] for k, v in model.state_dict().items() if v.data_ptr() in grad_by_storage}
    torch.optim.AdamW(model.parameters(), lr=LR, eps=EPS, weight_decay=WD).step()
    after = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return pg_loss.item(), grad_norm.item(), grads, before, after


def assert_grads_match(name: str, actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Clipped gradients agree within float32 summation error relative to the tensor's largest entry."""
    tolerance = GRAD_RTOL * float(expected.abs().max())
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=0, msg=name)


def assert_adamw_step_matches(name: str, actual, expected, actor_grad, ref_grad, before) -> None:
    """AdamW's first step by hand, ``p (1 - lr wd) - lr g / (|g| + eps)`` (bias-corrected moments are ``g`` and
    ``g^2``), on the actor's gradients; and the reference's parameters where ``|g| > 100 eps`` (the step is then
    ``lr * sign(g)`` to within 1 % and the sign is far beyond float32 summation error)."""
    if ref_grad is None:  # a buffer: unchanged by the step
        torch.testing.assert_close(actual, expected, atol=PARAM_ATOL, rtol=0, msg=name)
        return
    by_hand = before * (1 - LR * WD) - LR * actor_grad / (actor_grad.abs() + EPS)
    torch.testing.assert_close(actual, by_hand, atol=PARAM_ATOL, rtol=0, msg=f"{name}: AdamW step by hand")
    clear = ref_grad.abs() > 100 * EPS
    torch.testing.assert_close(actual[clear], expected[clear], atol=PARAM_ATOL, rtol=0, msg=f"{name}: reference")


def assert_update_matches_reference(result: dict, reference: tuple, variant) -> None:
    """Loss, grad norm, clipped gradients and AdamW step of rank 0's ``result`` against ``reference_step``."""
    ref_pg_loss, ref_grad_norm, ref_grads, ref_before, ref_params = reference
    metrics = result["metrics"]
    assert metrics["actor/pg_loss"][0] == pytest.approx(ref_pg_loss, rel=1e-4, abs=1e-6), variant
    assert metrics["actor/grad_norm"][0] == pytest.approx(ref_grad_norm, rel=1e-4), variant
    for name, expected in ref_grads.items():
        if name in result["grads"]:
            assert_grads_match(name, result["grads"][name], expected)
    for name, expected in ref_params.items():
        actor_grad = result["grads"].get(TIED.get(name, name))
        assert_adamw_step_matches(
            name, result["params"][name], expected, actor_grad, ref_grads.get(name), ref_before[name]
        )


def _actor_rank(rank, world, model_path, batch, variants):
    """For each (micro_bsz, use_dynamic_bsz, use_remove_padding): a fresh actor, log-probs, one update."""
    return [_one_variant(rank, world, model_path, batch, *variant) for variant in variants]


def _one_variant(
    rank,
    world,
    model_path,
    batch,
    micro_bsz,
    use_dynamic_bsz,
    use_remove_padding,
    engine_overrides=None,
    sp=1,
    gradient_checkpointing=False,
    optimizer_overrides=None,
    skip_log_probs=False,
):
    """One actor built fresh, its log-probs (unless ``skip_log_probs``) and one update; ``gathers`` counts the FSDP2
    parameter groups the update all-gathers, group by group."""
    from verl.protocol import DataProto
    from verl.workers.actor import DataParallelPPOActor
    from verl.workers.config import FSDPActorConfig, FSDPEngineConfig, HFModelConfig, OptimConfig
    from verl.workers.engine.fsdp.engine import FSDPEngine
    from verl.workers.engine.fsdp.sharding import fsdp_modules, param_groups

    optim = OptimConfig(lr=LR, weight_decay=WD, override_optimizer_config={"eps": EPS, **(optimizer_overrides or {})})
    dp = world // sp
    config = FSDPActorConfig(
        ppo_mini_batch_size=BATCH // dp,
        ulysses_sequence_parallel_size=sp,
        ppo_micro_batch_size_per_gpu=micro_bsz,
        use_dynamic_bsz=use_dynamic_bsz,
        ppo_max_token_len_per_gpu=24,
        clip_ratio=CLIP,
        entropy_coeff=ENT,
        use_kl_loss=True,
        kl_loss_coef=KL,
        kl_loss_type="low_var_kl",
        grad_clip=1.0,
        optim=optim,
    )
    model_config = HFModelConfig(
        path=model_path, use_remove_padding=use_remove_padding, enable_gradient_checkpointing=gradient_checkpointing
    )
    engine_config = FSDPEngineConfig(**(engine_overrides or {}))
    engine = FSDPEngine(model_config, engine_config, optim, role="actor", ulysses_sequence_parallel_size=sp)
    engine.initialize()
    for key, value in (optimizer_overrides or {}).items():  # the override reached torch's optimizer
        assert engine.optimizer.defaults[key] == value, key
    actor = DataParallelPPOActor(
        config, engine.module, engine.optimizer, use_remove_padding=use_remove_padding, ulysses=engine.ulysses
    )
    data = DataProto.from_dict(tensors=batch, meta_info={"temperature": 1.0}).chunk(dp)[engine.dp_rank]
    data.meta_info.update(micro_batch_size=micro_bsz, use_dynamic_bsz=use_dynamic_bsz, max_token_len=24)
    with counting_gathers() as log_prob_gathers:
        log_probs, entropys = (None, None) if skip_log_probs else actor.compute_log_prob(data, calculate_entropy=True)
    gathered_after_log_probs = [
        group.is_unsharded for unit in fsdp_modules(engine.module) for group in param_groups(unit)
    ]
    grads = {}

    def capture_clipped_grads(optimizer, args, kwargs):  # runs on every rank right before the AdamW step
        for name, param in engine.module.named_parameters():
            grads[name] = param.grad.full_tensor() if hasattr(param.grad, "full_tensor") else param.grad.clone()

    engine.optimizer.register_step_pre_hook(capture_clipped_grads)
    with counting_gathers() as gathers:
        metrics = actor.update_policy(data)
    params = dict(engine.iter_full_state_dict())
    out = {
        "log_probs": log_probs,
        "entropys": entropys,
        "metrics": metrics,
        "gathers": dict(gathers),
        "log_prob_gathers": dict(log_prob_gathers),
        "gathered_after_log_probs": gathered_after_log_probs,
    }
    return {**out, "params": params, "grads": grads} if rank == 0 else out


@pytest.fixture(scope="module")
def setup():
    path = tiny_model_path("llama")
    batch = make_update_batch(path)
    return path, batch, reference_step(path, batch)


VARIANTS = {  # world size -> [(micro_bsz, use_dynamic_bsz, use_remove_padding)]
    2: [(2, False, True), (1, True, True)],
    1: [(8, False, False)],
}


@pytest.mark.parametrize("world", [2, 1], ids=["2ranks-micro2-rmpad+dynamic", "1rank-micro8-padded"])
def test_update_matches_plain_reference_step(setup, world):
    from transformers import AutoModelForCausalLM

    path, batch, reference = setup
    per_rank = run_on_ranks(_actor_rank, world, path, batch, VARIANTS[world])
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        expected_log_probs = reference_log_probs(model, batch)
    mask = batch["response_mask"].bool()
    for index, variant in enumerate(VARIANTS[world]):
        results = [rank_results[index] for rank_results in per_rank]
        log_probs = torch.cat([r["log_probs"] for r in results])
        torch.testing.assert_close(log_probs[mask], expected_log_probs[mask], atol=2e-5, rtol=1e-5)
        assert torch.all(log_probs[~mask] == 0)

        assert_update_matches_reference(results[0], reference, variant)
        moved = results[0]["params"]["model.layers.0.mlp.up_proj.weight"] - model.model.layers[0].mlp.up_proj.weight
        assert moved.abs().max() > LR / 2  # the step really moved the weights


def _actor_fused_adamw_rank(rank, world, model_path, batch, variants):
    return [_one_variant(rank, world, model_path, batch, *v, optimizer_overrides={"fused": True}) for v in variants]


def test_fused_adamw_through_override_optimizer_config_matches_the_plain_reference_step(setup):
    """``optim.override_optimizer_config.fused=true`` (verl's key; one kernel for the whole AdamW step on GPU, the
    lever NOTES_gpu names for the 0.5B update) reaches torch's AdamW and steps FSDP2's sharded parameters as the
    hand-written reference does."""
    path, batch, reference = setup
    variant = VARIANTS[1][0]
    (results,) = run_on_ranks(_actor_fused_adamw_rank, 1, path, batch, [variant])
    assert results[0]["metrics"]  # the update ran
    assert_update_matches_reference(results[0], reference, variant)


def reference_entropy(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Entropy ``(bs, R)`` of the next-token distribution before each response token, each sequence alone."""
    mask = batch["response_mask"]
    out = torch.zeros(mask.shape)
    for row in range(mask.shape[0]):
        ids = batch["input_ids"][row][batch["attention_mask"][row].bool()]
        n_resp = int(mask[row].sum())
        log_softmax = torch.log_softmax(model(input_ids=ids[None]).logits[0, :-1].float(), dim=-1)
        out[row, :n_resp] = -(log_softmax.exp() * log_softmax).sum(-1)[len(ids) - 1 - n_resp :]
    return out


def _actor_sp_rank(rank, world, model_path, batch, variants):
    return [
        _one_variant(rank, world, model_path, batch, *variant, sp=2, gradient_checkpointing=True)
        for variant in variants
    ]


SP_VARIANTS = [(2, False, True), (1, True, True)]  # (micro_bsz, use_dynamic_bsz, use_remove_padding)


@pytest.mark.slow
def test_sequence_parallel_update_matches_single_process_reference(setup):
    """SP=2 over 2 ranks (one data-parallel group) against the SP=1 single-process references."""
    from transformers import AutoModelForCausalLM

    path, batch, reference = setup
    per_rank = run_on_ranks(_actor_sp_rank, 2, path, batch, SP_VARIANTS)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        expected_log_probs = reference_log_probs(model, batch)
        expected_entropy = reference_entropy(model, batch)
    mask = batch["response_mask"].bool()
    for index, variant in enumerate(SP_VARIANTS):
        results = [rank_results[index] for rank_results in per_rank]
        for result in results:  # both ranks of the group computed every row
            torch.testing.assert_close(result["log_probs"][mask], expected_log_probs[mask], atol=2e-5, rtol=1e-5)
            torch.testing.assert_close(result["entropys"][mask], expected_entropy[mask], atol=2e-5, rtol=1e-5)
            assert torch.all(result["log_probs"][~mask] == 0)
        assert_update_matches_reference(results[0], reference, variant)


def _on_policy_rank(rank, world, model_path, batch):
    """The same on-policy step twice from the same weights: old_log_probs from a compute_log_prob pass, and
    without them (taken from the update's own forward). Returns both steps' metrics, clipped grads, params."""
    from verl.protocol import DataProto
    from verl.workers.actor import DataParallelPPOActor
    from verl.workers.config import FSDPActorConfig, FSDPEngineConfig, HFModelConfig, OptimConfig
    from verl.workers.engine.fsdp.engine import FSDPEngine

    optim = OptimConfig(lr=LR, weight_decay=WD, override_optimizer_config={"eps": EPS})
    fields = dict(ppo_mini_batch_size=BATCH // world, ppo_micro_batch_size_per_gpu=2, use_kl_loss=True, optim=optim)
    out = {}
    for path in ("recomputed", "from_update"):
        engine = FSDPEngine(
            HFModelConfig(path=model_path, enable_gradient_checkpointing=False), FSDPEngineConfig(), optim, role="actor"
        ).initialize()
        actor = DataParallelPPOActor(FSDPActorConfig(**fields), engine.module, engine.optimizer)
        tensors = {k: v for k, v in batch.items() if k != "old_log_probs"}
        data = DataProto.from_dict(tensors=tensors, meta_info={"temperature": 1.0}).chunk(world)[rank]
        if path == "recomputed":
            data.meta_info.update(micro_batch_size=4, use_dynamic_bsz=False)
            data.batch["old_log_probs"], out["entropys"] = actor.compute_log_prob(data, calculate_entropy=True)
        grads = {}

        def capture(optimizer, args, kwargs, grads=grads, engine=engine):
            for name, param in engine.module.named_parameters():
                grads[name] = param.grad.full_tensor()

        engine.optimizer.register_step_pre_hook(capture)
        metrics = actor.update_policy(data)
        out[path] = {"metrics": metrics, "grads": grads, "params": dict(engine.iter_full_state_dict())}
    off_policy = DataParallelPPOActor(FSDPActorConfig(**fields, ppo_epochs=2), engine.module, engine.optimizer)
    try:
        off_policy.update_policy(data.select(batch_keys=[k for k in data.batch.keys() if k != "old_log_probs"]))
    except ValueError as error:
        out["off_policy_error"] = str(error)
    return out


def test_on_policy_old_log_probs_from_the_update_match_the_recomputed_pass(setup):
    """The skip of the old-log-prob pass is exact: same loss, grad norm, clipped grads and step; ``actor/entropy``
    of the update equals the token-mean of the skipped pass's entropies; off-policy steps refuse to skip."""
    from verl.trainer.ppo.core_algos import agg_loss

    path, batch, _ = setup
    world = 2
    per_rank = run_on_ranks(_on_policy_rank, world, path, batch)
    recomputed, from_update = per_rank[0]["recomputed"], per_rank[0]["from_update"]
    for name in ("actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "actor/ppo_kl", "actor/pg_clipfrac"):
        assert from_update["metrics"][name][0] == pytest.approx(recomputed["metrics"][name][0], rel=1e-5, abs=1e-7)
    assert abs(from_update["metrics"]["actor/ppo_kl"][0]) < 1e-6  # ratio 1: π_old is the policy itself
    entropys = torch.cat([r["entropys"] for r in per_rank])
    expected_entropy = float(agg_loss(entropys, batch["response_mask"].float(), "token-mean"))
    assert from_update["metrics"]["actor/entropy"][0] == pytest.approx(expected_entropy, rel=1e-5)
    assert "actor/entropy" not in recomputed["metrics"]  # entropy_coeff=0: the update measures none
    for name, grad in recomputed["grads"].items():
        assert_grads_match(name, from_update["grads"][name], grad)
    for name, expected in recomputed["params"].items():
        grad = recomputed["grads"].get(TIED.get(name, name))
        if grad is None:  # a buffer
            torch.testing.assert_close(from_update["params"][name], expected, atol=PARAM_ATOL, rtol=0)
            continue
        clear = grad.abs() > 100 * EPS  # where Adam's first step is lr * sign(g), far from rounding
        torch.testing.assert_close(from_update["params"][name][clear], expected[clear], atol=PARAM_ATOL, rtol=0)
    assert "ppo_epochs=2" in per_rank[0]["off_policy_error"]


def test_a_vision_placeholder_in_a_response_fails_naming_row_and_id(tmp_path):
    """A response holding ``<|image_pad|>`` (no image behind it) fails before the model runs, naming the row, the
    response position and the id, for the log-prob pass and the update alike; transformers would otherwise stop with
    "Image features and image tokens do not match, tokens: 289, features: 288" (issue 21, session 5's GPU run)."""
    from transformers import AutoModelForImageTextToText

    from tests.support.models import tiny_vlm_path
    from tests.support.vision import shapes_rows, vision_prompts, with_responses
    from verl.utils import hf_processor
    from verl.workers.actor.dp_actor import DataParallelPPOActor
    from verl.workers.config.actor import FSDPActorConfig

    path = tiny_vlm_path("qwen2_vl")
    processor = hf_processor(path)
    batch = with_responses(vision_prompts(processor, shapes_rows(3), tmp_path), 6, vocab=1000)
    image = processor.image_token_id
    assert image >= 1000  # the random responses hold no placeholder of their own
    batch.batch["responses"][2, 0] = image  # position 0 is inside every response (lengths 1..6)
    batch.batch["input_ids"][2, -6] = image
    batch.batch["advantages"] = torch.zeros_like(batch.batch["response_mask"], dtype=torch.float32)
    batch.meta_info["micro_batch_size"] = 3
    module = AutoModelForImageTextToText.from_pretrained(path)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.0)
    config = FSDPActorConfig(ppo_mini_batch_size=3, ppo_micro_batch_size_per_gpu=3, ppo_epochs=1)
    actor = DataParallelPPOActor(config, module, optimizer, use_remove_padding=True)
    expected = f"response of row 2 holds the vision placeholder id {image} at response position 0"
    with pytest.raises(ValueError, match=expected):
        actor.compute_log_prob(batch)
    with pytest.raises(ValueError, match=expected):
        actor.update_policy(batch)
    batch.batch["responses"][2, 0] = 0
    batch.batch["input_ids"][2, -6] = 0
    log_probs, _ = actor.compute_log_prob(batch)  # without it the same batch goes through
    assert torch.isfinite(log_probs).all()


def _accumulation_rank(rank, world, model_path, batch):
    one_per_row = (1, False, True)  # micro-batches of one row: 4 per rank on 2 ranks, 8 on 1
    kept = _one_variant(rank, world, model_path, batch, *one_per_row, {"reshard_after_forward": False})
    default = _one_variant(rank, world, model_path, batch, *one_per_row)
    return kept, default


@pytest.mark.parametrize("world", [2, 1], ids=["2ranks", "1rank"])
def test_parameters_kept_after_forward_are_gathered_once_a_mini_batch_and_the_update_is_unchanged(setup, world):
    """``fsdp_config.reshard_after_forward=False``: each FSDP2 unit all-gathers once for the whole mini-batch, not
    once a micro-batch (``verl.workers.engine.fsdp.accumulation``), and the update is still the hand-written PPO
    step; the default gathers each unit for every micro-batch's forward and again for its backward. The log-prob pass
    before it gathers each kept unit once and leaves it sharded (``forward_only``), with the default's log-probs."""
    path, batch, reference = setup
    micro_batches = BATCH // world
    per_rank = run_on_ranks(_accumulation_rank, world, path, batch)
    for kept, default in per_rank:
        groups = len(default["gathers"])
        assert groups == 3  # the tiny Llama's two decoder layers and the root
        assert sorted(kept["gathers"].values()) == [1] * groups
        assert sorted(default["gathers"].values()) == [2 * micro_batches] * groups
        assert sorted(kept["log_prob_gathers"].values()) == [1] * groups
        assert sorted(default["log_prob_gathers"].values()) == [micro_batches] * groups
        assert kept["gathered_after_log_probs"] == default["gathered_after_log_probs"] == [False] * groups
        torch.testing.assert_close(kept["log_probs"], default["log_probs"], rtol=0, atol=1e-6)
    kept, default = per_rank[0]
    assert_update_matches_reference(kept, reference, "reshard_after_forward=False")
    assert_update_matches_reference(default, reference, "default")


def test_output_layer_tokens_count_the_response_rows():
    """The MFU metric's output-layer positions: each row's last prompt token and its response tokens but the last
    column where the packed forward runs the head on those alone; every token (None) in the padded forward."""
    from transformers import AutoModelForCausalLM

    from verl.protocol import DataProto
    from verl.workers.actor.dp_actor import DataParallelPPOActor
    from verl.workers.config.actor import FSDPActorConfig

    module = AutoModelForCausalLM.from_pretrained(tiny_model_path("llama"))
    config = FSDPActorConfig(ppo_mini_batch_size=2, ppo_micro_batch_size_per_gpu=2, ppo_epochs=1)
    attention_mask = torch.tensor([[0, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    batch = rollout_batch(batch_size=2, prompt_length=3, response_length=3)
    batch["attention_mask"] = attention_mask
    data = DataProto.from_dict(tensors=batch)
    # response length 3, columns 2..4: 3 tokens in row 0 and 3 in row 1
    assert DataParallelPPOActor(config, module, use_remove_padding=True).output_layer_tokens(data) == 6
    assert DataParallelPPOActor(config, module, use_remove_padding=False).output_layer_tokens(data) is None
