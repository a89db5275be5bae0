"""``in_buckets``: what a consumer sees, and when the source is read, worked out by hand for 4-byte tensors."""

from __future__ import annotations

import torch

from verl.utils.weight_buckets import in_buckets


def test_a_bucket_is_read_whole_before_any_of_it_is_yielded():
    pulled: list[str] = []

    def source():
        for index in range(5):  # five float32 scalars, 4 bytes each
            pulled.append(f"w{index}")
            yield f"w{index}", torch.tensor(float(index))

    seen = []
    for name, _ in in_buckets(source(), bucket_bytes=8):  # two tensors fill a bucket
        seen.append((name, len(pulled)))
    # w0 and w1 are yielded once both are read, w2 and w3 once four are, w4 (a partial last bucket) at the end
    assert seen == [("w0", 2), ("w1", 2), ("w2", 4), ("w3", 4), ("w4", 5)]


def test_floating_tensors_take_the_dtype_and_integer_ones_keep_theirs():
    pairs = [("weight", torch.ones(3, dtype=torch.float32)), ("steps", torch.arange(3))]
    out = dict(in_buckets(pairs, bucket_bytes=1 << 20, dtype=torch.bfloat16, device="cpu"))
    assert out["weight"].dtype == torch.bfloat16 and torch.equal(out["weight"].float(), torch.ones(3))
    assert out["steps"].dtype == torch.int64 and torch.equal(out["steps"], torch.arange(3))
