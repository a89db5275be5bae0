"""The actor update alone, on packed batches of 64k tokens, for random-weight models of Qwen2.5-0.5B's and
SmolLM2-135M's shapes (built here from config dicts; no hub): tokens/s and MFU per variant (GPU, one device call).

Each variant runs in its own process (a crash or an out-of-memory stays there): it writes the random model once,
builds the real FSDP2 engine and ``DataParallelPPOActor`` on one rank, runs ``update_policy`` (one optimizer step
over the whole batch, micro-batches by token budget) twice as warm-up and ``--steps`` times timed, and one
``compute_log_prob`` pass. MFU counts model FLOPs (``verl.utils.flops_counter``) against the card's dense bf16
peak; the measured ceiling of a large bf16 matmul is printed beside it. Before the variants, kernel checks compare
the varlen attention and the fused log-prob head with plain references on the device.

    python -m benchmarks.bench_gpu_update                   # every shape and variant (GPU)
    python -m benchmarks.bench_gpu_update --shapes tiny     # a small model on CPU, to check the code paths
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.copy_stacks import profile_copy_stacks
from benchmarks.gpu.device_gaps import device_gaps, gap_table
from benchmarks.gpu.update_variants import BASE, BASELINE, PLAN, PROFILED, SHAPES, STACK_PROFILED, VARIANTS

TOKENS_PER_STEP = 65536
PROMPT_MAX, RESPONSE_MAX = 256, 768


def model_dir(shape: str, root: Path) -> Path:
    """A saved random-weight model of ``shape`` (written once under ``root``)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    target = root / shape
    if (target / "config.json").exists():
        return target
    fields = dict(SHAPES[shape])
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(target, safe_serialization=True)
    return target


def make_batch(vocab: int, tokens: int, seed: int = 0) -> dict:
    """A rollout batch laid out like verl's (left-padded prompts, right-padded responses) of ``tokens`` real
    tokens, with old log-probs near a policy's and random advantages."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    prompt_lens, response_lens, total = [], [], 0
    while total < tokens:
        prompt_lens.append(int(torch.randint(64, PROMPT_MAX + 1, (1,), generator=gen)))
        response_lens.append(int(torch.randint(64, RESPONSE_MAX + 1, (1,), generator=gen)))
        total += prompt_lens[-1] + response_lens[-1]
    response_lens[-1] -= total - tokens  # exactly ``tokens`` real tokens
    if response_lens[-1] < 1:
        raise ValueError(f"cannot lay out {tokens} tokens with these length ranges")
    batch_size = len(prompt_lens)
    prompt_len = torch.tensor(prompt_lens)[:, None]
    response_len = torch.tensor(response_lens)[:, None]
    prompt_mask = (torch.arange(PROMPT_MAX)[None] >= PROMPT_MAX - prompt_len).long()
    response_mask = (torch.arange(RESPONSE_MAX)[None] < response_len).long()
    attention_mask = torch.cat([prompt_mask, response_mask], dim=1)
    input_ids = torch.randint(3, vocab, attention_mask.shape, generator=gen) * attention_mask
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    shape = response_mask.shape
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "responses": input_ids[:, PROMPT_MAX:],
        "response_mask": response_mask,
        # near a random-weight model's own log-probs (about -log V), so the PPO ratio is near 1 and gradients flow
        "old_log_probs": (-torch.log(torch.tensor(float(vocab))) + 0.1 * torch.randn(shape, generator=gen))
        * response_mask,
        "advantages": torch.randn(shape, generator=gen) * response_mask,
        "batch_size": batch_size,
    }


def _init_dist() -> None:
    import torch
    import torch.distributed as dist

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    if torch.cuda.is_available():
        torch.cuda.set_device(0)
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", rank=0, world_size=1)


def run_variant(shape: str, variant: str, root: Path, steps: int) -> dict:
    """Build the engine for ``variant`` and time ``steps`` updates (after two warm-up steps)."""
    import torch

    from verl.protocol import DataProto
    from verl.utils.flops_counter import FlopsCounter
    from verl.workers.actor import DataParallelPPOActor
    from verl.workers.config import FSDPActorConfig, FSDPEngineConfig, HFModelConfig, OptimConfig, WrapPolicyConfig
    from verl.workers.engine.fsdp.engine import FSDPEngine

    spec = {**BASE, **VARIANTS[variant]}
    if spec["logprob"]:
        os.environ["VERL_LOGPROB_KERNEL"] = spec["logprob"]
    if spec["static"]:
        compile_dynamic = torch.compile
        torch.compile = lambda fn, **kwargs: compile_dynamic(fn, **{**kwargs, "dynamic": False})
    if spec["rope_tokens"]:
        from benchmarks.gpu.rope_layout import use_token_major_rope

        use_token_major_rope()
    if spec["nd_tiling"]:
        import torch._inductor.config as inductor_config

        inductor_config.triton.prefer_nd_tiling = True
    if spec["nd_tiling"] is False:
        from verl.workers.engine.fsdp import engine as fsdp_engine

        fsdp_engine.CUDA_COMPILE_OPTIONS = {}
    if spec["rows"]:  # the output layer on the response rows on CUDA too (each variant runs in its own child process)
        from verl.workers.engine.fsdp import forward

        forward.RESPONSE_ROWS_DEVICES = (*forward.RESPONSE_ROWS_DEVICES, "cuda")
    if spec["kernel"]:
        from benchmarks.gpu.packed_attention import use_kernel

        use_kernel(spec["kernel"])
    path = model_dir(shape, root)
    _init_dist()
    cuda = torch.cuda.is_available()
    tokens = TOKENS_PER_STEP if shape != "tiny" else 2048
    batch = make_batch(SHAPES[shape]["vocab_size"], tokens)
    rows = batch.pop("batch_size")
    # explicit both ways: the engine fuses AdamW on CUDA by default since session 16, and the variants without
    # `+fusedadam` stay comparable with the earlier sessions' (torch's foreach AdamW)
    optim = OptimConfig(lr=1e-6, override_optimizer_config={"fused": bool(spec["fused_adam"])})
    config = FSDPActorConfig(
        ppo_mini_batch_size=rows,
        use_dynamic_bsz=True,
        ppo_max_token_len_per_gpu=spec["tokens"] if cuda else 1024,
        ppo_epochs=1,
        entropy_coeff=0.0,
        grad_clip=1.0,
        optim=optim,
    )
    model_config = HFModelConfig(
        path=str(path),
        use_remove_padding=True,
        use_fused_kernels=spec["fused"],
        use_liger=spec["liger"],
        enable_gradient_checkpointing=spec["ckpt"],
        enable_activation_offload=spec["act_offload"],
        override_config={"attn_implementation": spec["attn"]},
    )
    wrap = WrapPolicyConfig(transformer_layer_cls_to_wrap=[] if spec["root_only"] else None)
    engine_config = FSDPEngineConfig(reshard_after_forward=spec["reshard"], wrap_policy=wrap)
    engine = FSDPEngine(model_config, engine_config, optim, role="actor", use_torch_compile=spec["compile"])
    engine.initialize()
    # as ActorRole builds it: use_torch_compile also fuses the log-prob/entropy chunk math
    actor = DataParallelPPOActor(
        config,
        engine.forward_module,
        engine.optimizer,
        use_remove_padding=True,
        use_fused_kernels=spec["fused"],
        use_torch_compile=spec["compile"],
    )
    data = DataProto.from_dict(tensors=batch, meta_info={"temperature": 1.0})
    seqlens = batch["attention_mask"].sum(-1).tolist()
    counter = FlopsCounter(engine.hf_config())
    head_tokens = actor.output_layer_tokens(data)  # None: the output layer on every token

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    times = []
    for step in range(2 + steps):
        sync()
        start = time.perf_counter()
        metrics = actor.update_policy(data)
        sync()
        if step >= 2:
            times.append(time.perf_counter() - start)
    peak_update_gb = torch.cuda.max_memory_allocated() / 1e9 if cuda else 0.0
    if cuda and variant in PROFILED:
        try:
            print(profile_step(lambda: actor.update_policy(data), step_s=statistics.median(times)), flush=True)
        except Exception as error:  # the numbers above must survive a profiler problem
            print(f"PROFILE failed: {error!r}", flush=True)
    if cuda and variant in STACK_PROFILED:
        try:
            print(profile_copy_stacks(lambda: actor.update_policy(data)), flush=True)
        except Exception as error:
            print(f"PROFILE failed: {error!r}", flush=True)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    data.meta_info.update(micro_batch_size=None, use_dynamic_bsz=True, max_token_len=config.ppo_max_token_len_per_gpu)
    actor.compute_log_prob(data, calculate_entropy=False)  # warm-up: the no-grad graph compiles on its first call
    sync()
    start = time.perf_counter()
    actor.compute_log_prob(data, calculate_entropy=False)
    sync()
    infer_s = time.perf_counter() - start
    step_s = statistics.median(times)
    peak_gb = torch.cuda.max_memory_allocated() / 1e9 if cuda else 0.0
    return {
        "shape": shape,
        "variant": variant,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "tokens": sum(seqlens),
        "sequences": rows,
        "micro_batch_tokens": config.ppo_max_token_len_per_gpu,
        "step_s": step_s,
        "step_s_all": times,
        "tokens_per_s": sum(seqlens) / step_s,
        "head_tokens": head_tokens,
        "mfu_update": counter.mfu(seqlens, step_s, 1, head_tokens=head_tokens),
        "tflops_update": counter.step_flops(seqlens, head_tokens=head_tokens) / step_s / 1e12,
        "infer_s": infer_s,
        "mfu_infer": counter.mfu(seqlens, infer_s, 1, backward=False, head_tokens=head_tokens),
        "grad_norm": metrics["actor/grad_norm"][0],
        "peak_infer_gb": peak_gb,
        "peak_update_gb": peak_update_gb,
        "attn": engine.hf_config()._attn_implementation,
    }


def profile_step(step, step_s: float) -> str:
    """Kernel-time table of one ``step()``: where the device time goes, how much of the step it fills, and the
    host op running while the device idles (:mod:`benchmarks.gpu.device_gaps`)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    events = prof.key_averages()
    kernel_us = sum(e.self_device_time_total for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
    table = events.table(sort_by="self_device_time_total", row_limit=30, max_name_column_width=70)
    gaps = gap_table(device_gaps(prof.events(), min_gap_us=10.0), rows=25)
    return f"PROFILE kernels {kernel_us / 1e6:.3f} s of a {step_s:.3f} s step\n{table}\n{gaps}"


def kernel_checks() -> dict:
    """Varlen attention (fwd + bwd) against per-sequence sdpa, and the fused head against full logits, on the
    device in bf16: relative errors ``|a - b| / |b|`` over the whole tensor; and the bf16 matmul ceiling."""
    import torch
    import torch.nn.functional as F

    from verl.utils.chunked_logprobs import log_probs_from_hidden, log_probs_from_logits
    from verl.workers.engine.fsdp.attention import _cpu_varlen, _cuda_varlen

    device = "cuda" if torch.cuda.is_available() else "cpu"
    out: dict = {}
    torch.manual_seed(0)
    lens = [700, 33, 1200, 5, 400] if device == "cuda" else [70, 3, 120, 1, 40]
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=device)
    for hq, hkv in ((14, 2), (9, 3)):
        q, k, v = (torch.randn(sum(lens), h, 64, device=device, dtype=torch.bfloat16) for h in (hq, hkv, hkv))
        for t in (q, k, v):
            t.requires_grad_(True)
        grad = torch.randn(sum(lens), hq, 64, device=device, dtype=torch.bfloat16)
        if device == "cuda":
            fast = _cuda_varlen(q, k, v, cu, max(lens), 64**-0.5)
        else:
            fast = _cpu_varlen(q, k, v, cu, 64**-0.5)
        fast_grads = torch.autograd.grad(fast, (q, k, v), grad)
        qf, kf, vf = (t.detach().float().requires_grad_(True) for t in (q, k, v))
        ref = _cpu_varlen(qf, kf, vf, cu.cpu() if device == "cpu" else cu, 64**-0.5)
        ref_grads = torch.autograd.grad(ref, (qf, kf, vf), grad.float())

        def rel(a, b):
            return float((a.detach().float() - b.detach()).norm() / b.detach().norm())

        name = f"varlen_attn_h{hq}_kv{hkv}"
        out[name] = {"out": rel(fast, ref), **{f"d{n}": rel(a, b) for n, a, b in zip("qkv", fast_grads, ref_grads)}}
    rows, vocab = (3000, 151936) if device == "cuda" else (200, 5000)
    hidden = torch.randn(rows, 896, device=device, dtype=torch.bfloat16, requires_grad=True)
    weight = (0.05 * torch.randn(vocab, 896, device=device, dtype=torch.bfloat16)).requires_grad_(True)
    labels = torch.randint(0, vocab, (rows,), device=device)
    fused = log_probs_from_hidden(hidden, weight, labels, 0.9, True)
    fused_grads = torch.autograd.grad(fused[0].sum() + fused[1].sum(), (hidden, weight))
    logits = hidden @ weight.t()
    plain = log_probs_from_logits(logits, labels, 0.9, True)
    plain_grads = torch.autograd.grad(plain[0].sum() + plain[1].sum(), (hidden, weight))
    hf, wf = hidden.detach().float().requires_grad_(True), weight.detach().float().requires_grad_(True)
    logp = F.log_softmax((hf @ wf.t()) / 0.9, dim=-1)
    ref_lp, ref_ent = logp.gather(1, labels[:, None])[:, 0], -(logp.exp() * logp).sum(-1)
    ref_grads = torch.autograd.grad(ref_lp.sum() + ref_ent.sum(), (hf, wf))
    for name, (lp, ent), grads in (("fused_head", fused, fused_grads), ("logits_head", plain, plain_grads)):
        out[name] = {
            "log_prob_max_abs": float((lp - ref_lp).abs().max()),
            "entropy_max_abs": float((ent - ref_ent).abs().max()),
            "d_hidden": float((grads[0].float() - ref_grads[0]).norm() / ref_grads[0].norm()),
            "d_weight": float((grads[1].float() - ref_grads[1]).norm() / ref_grads[1].norm()),
        }
    if device == "cuda":
        a, b = (torch.randn(8192, 8192, device=device, dtype=torch.bfloat16) for _ in range(2))
        for _ in range(3):
            a @ b
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
        out["matmul_8192_bf16_tflops"] = 20 * 2 * 8192**3 / (time.perf_counter() - start) / 1e12
        out["logprob_head_ms"] = logprob_head_times()
    return out


def logprob_head_times(rows: int = 32768, vocab: int = 151936) -> dict:
    """Milliseconds of the log-prob head's forward and of its backward over one micro-batch's bf16 logits
    ``(rows, vocab)`` (the 0.5B update's), with the Triton kernels and with the compiled chunks, median of 5."""
    import torch

    from verl.utils.chunked_logprobs import log_probs_from_logits

    labels = torch.randint(0, vocab, (rows,), device="cuda")
    base = torch.randn(rows, vocab, device="cuda", dtype=torch.bfloat16)
    times: dict = {}
    for kernel in ("triton", "compile"):
        os.environ["VERL_LOGPROB_KERNEL"] = kernel
        forward_ms, backward_ms = [], []
        for _ in range(7):
            source = base.clone().requires_grad_(True)
            logits = source * 1  # non-leaf: the backward writes over it, as over the model's logits
            torch.cuda.synchronize()
            start = time.perf_counter()
            log_prob, _ = log_probs_from_logits(logits, labels, 1.0, False, compiled=True)
            torch.cuda.synchronize()
            middle = time.perf_counter()
            torch.autograd.grad(log_prob.sum(), logits)
            torch.cuda.synchronize()
            forward_ms.append(1e3 * (middle - start))
            backward_ms.append(1e3 * (time.perf_counter() - middle))
            del source, logits, log_prob
        times[kernel] = {"forward": statistics.median(forward_ms[2:]), "backward": statistics.median(backward_ms[2:])}
    os.environ.pop("VERL_LOGPROB_KERNEL")
    return times


def _child(args) -> None:
    if args.child == "checks":
        result = kernel_checks()
    else:
        shape, variant = args.child.split(":")
        result = run_variant(shape, variant, Path(args.models), args.steps)
    print("RESULT " + json.dumps(result), flush=True)
    import torch.distributed as dist

    if dist.is_initialized():  # left to the interpreter's exit, NCCL's teardown once hung a child past its timeout
        dist.destroy_process_group()


def child_output(cmd: list[str], timeout: float) -> str:
    """``cmd``'s stdout and stderr as text, ending in a TIMEOUT line where it ran past ``timeout`` and was killed.

    A child that printed its RESULT and then hung at exit keeps that result: the output it wrote before the kill comes
    back from ``TimeoutExpired`` as bytes, even with ``text=True``.
    """
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as error:
        parts = [
            part.decode(errors="replace") if isinstance(part, bytes) else part or ""
            for part in (error.stdout, error.stderr)
        ]
        return "".join(parts) + f"\nTIMEOUT after {timeout} s"


def _run_child(job: str, args, log: Path) -> dict | None:
    cmd = [sys.executable, "-m", "benchmarks.bench_gpu_update", "--child", job, "--models", args.models]
    cmd += ["--steps", str(args.steps)]
    start = time.perf_counter()
    output = child_output(cmd, args.timeout)
    with log.open("a") as handle:
        handle.write(f"===== {job} =====\n{output}\n")
    for line in output.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            result["wall_s"] = time.perf_counter() - start
            result["exit_timed_out"] = output.endswith(f"TIMEOUT after {args.timeout} s")
            return result
    tail = "\n".join(output.strip().splitlines()[-6:])
    print(f"[{job}] failed ({time.perf_counter() - start:.0f} s):\n{tail}", flush=True)
    return None


def summary_table(results: list[dict]) -> str:
    """The closing table of a run: one row per (shape, variant), speed-up against BASELINE of the same shape.

    A preset that leaves the baseline out (``update15`` runs only the default path) prints ``-`` there.
    """
    width = max([len("variant")] + [len(r["variant"]) for r in results])
    lines = [f"{'shape':<14} {'variant':<{width}} {'s/step':>7} {'tok/s':>9} {'MFU upd':>8} {'MFU fwd':>8} speedup"]
    base_of = {r["shape"]: r["step_s"] for r in results if r["variant"] == BASELINE}
    for r in results:
        base = base_of.get(r["shape"])
        speedup = f"{base / r['step_s']:>6.2f}x" if base else f"{'-':>7}"
        lines.append(
            f"{r['shape']:<14} {r['variant']:<{width}} {r['step_s']:>7.3f} {r['tokens_per_s']:>9.0f} "
            f"{r['mfu_update']:>8.1%} {r['mfu_infer']:>8.1%} {speedup}"
        )
    if results:
        device, tokens = results[0]["device"], results[0]["tokens"]
        lines.append(f"device: {device}; tokens/step {tokens}; speedup: vs {BASELINE} (same shape)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """``argv`` None (``make bench``): the default run, on CPU only the tiny shape."""
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    gpu_shapes = ["qwen2.5-0.5b", "smollm2-135m"]
    parser.add_argument("--shapes", nargs="*", default=gpu_shapes if torch.cuda.is_available() else ["tiny"])
    parser.add_argument("--variants", nargs="*", default=None, help="default: PLAN of each shape")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=150, help="seconds per variant process")
    parser.add_argument("--budget", type=int, default=540, help="start no variant after this many seconds")
    parser.add_argument("--models", default=os.path.join(tempfile.gettempdir(), "bench_gpu_update_models"))
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    parser.add_argument("--child", default=None)
    args = parser.parse_args([] if argv is None else argv)
    if args.child:
        _child(args)
        return
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    log = out_dir / "gpu_update.log"
    began = time.perf_counter()
    checks = _run_child("checks", args, log)
    print("kernel checks:", json.dumps(checks, indent=1), flush=True)
    results = []
    for shape in args.shapes:
        for variant in args.variants or PLAN[shape]:
            if time.perf_counter() - began > args.budget:
                print(f"[{shape} {variant}] skipped: past the {args.budget} s budget", flush=True)
                continue
            result = _run_child(f"{shape}:{variant}", args, log)
            if result is not None:
                results.append(result)
                print(
                    f"[{shape} {variant}] {result['step_s']:.3f} s/step, {result['tokens_per_s']:.0f} tok/s, "
                    f"MFU {result['mfu_update']:.1%} (infer {result['mfu_infer']:.1%}), wall {result['wall_s']:.0f} s",
                    flush=True,
                )
    (out_dir / "gpu_update.json").write_text(json.dumps({"checks": checks, "results": results}, indent=1))
    print("\n" + summary_table(results))


if __name__ == "__main__":
    main(sys.argv[1:])
