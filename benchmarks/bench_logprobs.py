"""Chunked ``logprobs_from_logits`` vs naive ``log_softmax`` + gather: extra peak memory and time, CPU.

Extra peak memory is the growth of the process's peak resident set (Linux ``VmHWM``, reset through
``/proc/self/clear_refs``) above what it held when the call started, i.e. what the call allocated on top of the
logits. Each case runs forward only, then forward + backward, on bf16 logits of a few thousand tokens.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from pathlib import Path

import torch

from verl.utils.torch_functional import logprobs_from_logits, logprobs_from_logits_naive

CASES = [(49152, 2048), (151936, 2048)]  # (vocabulary, tokens)
REPEATS = {"fwd": 2, "fwd+bwd": 1}  # the backward pass dominates the run time; one run keeps it under a minute
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def peak_tracking_available() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def measure(fn: Callable[[], None], repeats: int) -> tuple[float, float]:
    """``(extra peak MiB, best seconds)`` of ``fn`` over ``repeats`` runs."""
    best_seconds, extra_peak = float("inf"), 0.0
    for _ in range(repeats):
        gc.collect()
        _CLEAR_REFS.write_text("5")  # peak RSS := current RSS
        before = _status_kib("VmRSS")
        start = time.perf_counter()
        fn()
        best_seconds = min(best_seconds, time.perf_counter() - start)
        extra_peak = max(extra_peak, (_status_kib("VmHWM") - before) / 1024)
    return extra_peak, best_seconds


def forward(logprob_fn, logits, labels) -> Callable[[], None]:
    def run() -> None:
        with torch.no_grad():
            logprob_fn(logits, labels)

    return run


def forward_backward(logprob_fn, base_logits, labels) -> Callable[[], None]:
    def run() -> None:
        leaf = base_logits.detach().requires_grad_(True)
        logits = leaf * 1.0  # a non-leaf like a model's output, so the in-place backward may apply
        logprob_fn(logits, labels).sum().backward()
        del leaf, logits

    return run


def main() -> None:
    if not peak_tracking_available():
        print("bench_logprobs: /proc/self/clear_refs is not writable here; peak memory cannot be measured")
        return
    torch.manual_seed(0)
    print(
        f"{'vocab':>7} {'tokens':>6} {'pass':>8} {'naive MiB':>10} {'chunked MiB':>12} {'mem ratio':>9} "
        f"{'naive s':>8} {'chunked s':>9} {'time ratio':>10}"
    )
    for vocab, tokens in CASES:
        logits = torch.randn(tokens, vocab).bfloat16()
        labels = torch.randint(0, vocab, (tokens,))
        logits_mib = logits.numel() * logits.element_size() / 2**20
        for label, make in (("fwd", forward), ("fwd+bwd", forward_backward)):
            naive_mib, naive_s = measure(make(logprobs_from_logits_naive, logits, labels), REPEATS[label])
            chunked_mib, chunked_s = measure(make(logprobs_from_logits, logits, labels), REPEATS[label])
            print(
                f"{vocab:>7} {tokens:>6} {label:>8} {naive_mib:>10.0f} {chunked_mib:>12.0f} "
                f"{chunked_mib / max(naive_mib, 1e-9):>9.3f} {naive_s:>8.3f} {chunked_s:>9.3f} "
                f"{chunked_s / naive_s:>10.2f}",
                flush=True,
            )
        print(f"        (bf16 logits themselves: {logits_mib:.0f} MiB)")
        del logits, labels


if __name__ == "__main__":
    main()
