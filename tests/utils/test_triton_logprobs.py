"""The Triton log-prob kernels (:mod:`verl.utils.triton_logprobs`) against a float64 ``log_softmax`` reference.

CI has no GPU, so the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, numpy on the CPU) in a
subprocess: the environment variable must be set before Triton decorates the kernels. The GPU benchmark
(``benchmarks/bench_gpu_update.py``) checks the compiled kernels on the device against the same reference."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from verl.utils import chunked_logprobs, triton_logprobs

pytest.importorskip("triton")

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch
    from verl.utils import chunked_logprobs, triton_logprobs

    triton_logprobs.usable = lambda logits: logits.dim() == 2 and logits.stride(1) == 1  # the CPU, interpreted
    cases = json.loads(sys.argv[1])
    report = []
    for case in cases:
        gen = torch.Generator().manual_seed(case["seed"])
        rows, vocab, dtype = case["rows"], case["vocab"], getattr(torch, case["dtype"])
        wide = torch.randn(rows, vocab + case["pad"], generator=gen) * 3
        labels = torch.randint(0, vocab, (rows,), generator=gen)
        grad_lp = torch.randn(rows, generator=gen) if case["lp_grad"] else None
        grad_ent = torch.randn(rows, generator=gen) if case["ent_grad"] else None
        # reference: float64 log_softmax of the logits as the kernels see them (rounded to dtype)
        ref_logits = wide[:, :vocab].to(dtype).double().requires_grad_(True)
        log_p = torch.log_softmax(ref_logits / case["temperature"], dim=-1)
        ref_lp = log_p.gather(1, labels[:, None]).squeeze(1)
        ref_ent = -(log_p.exp() * log_p).sum(-1)
        loss = sum(((g.double() * t).sum() for g, t in ((grad_lp, ref_lp), (grad_ent, ref_ent)) if g is not None))
        loss.backward()
        # the kernels: a non-leaf view with row stride vocab + pad, its gradient written over it (or a leaf copy)
        if case["nonleaf"]:
            leaf = wide.to(dtype).clone().requires_grad_(True)
            logits = (leaf * 1)[:, :vocab]
        else:
            leaf = wide[:, :vocab].to(dtype).clone().requires_grad_(True)
            logits = leaf
        lp, ent = chunked_logprobs.log_probs_from_logits(logits, labels, case["temperature"], True)
        (sum(((g * t).sum() for g, t in ((grad_lp, lp), (grad_ent, ent)) if g is not None))).backward()
        grad = leaf.grad[:, :vocab]
        report.append({
            "lp": (lp.double() - ref_lp).abs().max().item(),
            "ent": (ent.double() - ref_ent).abs().max().item(),
            "grad": (grad.double() - ref_logits.grad).abs().max().item(),
            "grad_scale": ref_logits.grad.abs().max().item(),
            "lp_dtype": str(lp.dtype),
            "grad_dtype": str(grad.dtype),
        })
    outside = triton_logprobs.forward(torch.randn(2, 300), torch.tensor([300, -1]), 1.0, False)[0]
    report.append({"outside_vocabulary": outside.tolist()})
    print("REPORT " + json.dumps(report))
    """
)

CASES = [
    # two blocks with a masked tail, tempered, both gradients, the backward in place over a strided view
    dict(rows=5, vocab=5000, pad=3, dtype="float32", temperature=0.7, lp_grad=True, ent_grad=True, nonleaf=True),
    # exactly one block, untempered, the log-prob gradient only, a leaf (gradient into a new tensor)
    dict(rows=4, vocab=4096, pad=0, dtype="float32", temperature=1.0, lp_grad=True, ent_grad=False, nonleaf=False),
    # an entropy-only loss (no log-prob gradient), bfloat16 as the model makes it
    dict(rows=3, vocab=4500, pad=0, dtype="bfloat16", temperature=1.3, lp_grad=False, ent_grad=True, nonleaf=True),
    # a vocabulary smaller than a block
    dict(rows=3, vocab=37, pad=5, dtype="bfloat16", temperature=1.0, lp_grad=True, ent_grad=True, nonleaf=True),
]


@pytest.fixture(scope="module")
def report():
    cases = [dict(case, seed=i) for i, case in enumerate(CASES)]
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(cases)], env=env, capture_output=True, text=True, timeout=600
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("REPORT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("REPORT ") :])


@pytest.mark.parametrize("index", range(len(CASES)))
def test_kernels_match_float64_log_softmax(report, index):
    case, got = CASES[index], report[index]
    # float32 math throughout; bfloat16 only rounds the gradient written back: 8 significant bits, one unit of the
    # last place (the interpreter's float32 -> bfloat16 conversion truncates where the GPU rounds to nearest)
    grad_tolerance = 1e-5 if case["dtype"] == "float32" else 2**-7 * got["grad_scale"]
    assert got["lp"] < 1e-4 and got["ent"] < 1e-4, got
    assert got["grad"] <= grad_tolerance, got
    assert got["lp_dtype"] == "torch.float32"
    assert got["grad_dtype"] == f"torch.{case['dtype']}"


def test_kernels_run_only_where_they_can():
    """CPU tensors, float64, a column stride other than 1, and ``VERL_LOGPROB_KERNEL=compile`` keep the chunked
    path; the chunked path then gives the float64 reference's values."""
    logits = torch.randn(4, 10, dtype=torch.float64)
    assert not triton_logprobs.usable(logits)
    assert not triton_logprobs.usable(logits.float().t())
    labels = torch.tensor([1, 2, 3, 4])
    lp, _ = chunked_logprobs.log_probs_from_logits(logits, labels)
    torch.testing.assert_close(lp, torch.log_softmax(logits, -1).gather(1, labels[:, None]).squeeze(1))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_compiled_kernels_on_the_device_match_float64_log_softmax(dtype):
    """The kernels as Triton compiles them, on a real vocabulary (151,936 columns: 38 blocks, a masked tail)."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows, vocab = 64, 151_936
    source = (3 * torch.randn(rows, vocab, device="cuda", generator=gen)).to(dtype)
    labels = torch.randint(0, vocab, (rows,), device="cuda", generator=gen)
    grad_lp, grad_ent = (torch.randn(rows, device="cuda", generator=gen) for _ in range(2))
    reference = source.double().requires_grad_(True)
    log_p = torch.log_softmax(reference / 0.8, dim=-1)
    ref_lp, ref_ent = log_p.gather(1, labels[:, None]).squeeze(1), -(log_p.exp() * log_p).sum(-1)
    ((grad_lp.double() * ref_lp).sum() + (grad_ent.double() * ref_ent).sum()).backward()
    leaf = source.clone().requires_grad_(True)
    logits = leaf * 1  # non-leaf: the gradient is written over it
    assert triton_logprobs.usable(logits)
    lp, ent = chunked_logprobs.log_probs_from_logits(logits, labels, 0.8, True)
    ((grad_lp * lp).sum() + (grad_ent * ent).sum()).backward()
    torch.testing.assert_close(lp.double(), ref_lp, rtol=0, atol=1e-4)
    torch.testing.assert_close(ent.double(), ref_ent, rtol=0, atol=1e-4)
    scale = reference.grad.abs().max().item()
    tolerance = 1e-5 if dtype == torch.float32 else 2**-8 * scale
    assert (leaf.grad.double() - reference.grad).abs().max().item() <= tolerance


def test_compile_override_names_the_chunked_path(monkeypatch):
    if not torch.cuda.is_available():
        pytest.skip("the override only matters where the kernels would run (CUDA)")
    logits = torch.randn(4, 10, device="cuda")
    assert triton_logprobs.usable(logits)
    monkeypatch.setenv(triton_logprobs.ENV, "compile")
    assert not triton_logprobs.usable(logits)


def test_a_label_outside_the_vocabulary_reads_nothing(report):
    """The kernel masks the label's load: log-prob -inf instead of reading past the row."""
    assert report[-1]["outside_vocabulary"] == [float("-inf")] * 2
