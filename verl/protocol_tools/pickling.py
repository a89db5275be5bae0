"""DataProto's pickle state: tensors travel as numpy arrays.

With pickle protocol 5 (Ray) numpy arrays are out-of-band buffers, copied once, instead of torch's per-storage
``torch.save`` round trip. bf16 and the float8 dtypes, which numpy lacks, are reinterpreted as same-width integers
and viewed back on load. The state is ``{"batch": encoded batch or None, "non_tensor_batch": ..., "meta_info": ...}``
and must stay readable by every release: DataProtos are saved to disk with :meth:`DataProto.save_to_disk`.
"""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDict

_NUMPY_VIEW_DTYPES = {
    torch.bfloat16: torch.int16,
    torch.float8_e4m3fn: torch.uint8,
    torch.float8_e5m2: torch.uint8,
}


def encode_tensor(tensor: torch.Tensor) -> tuple[np.ndarray, str]:
    """A tensor as ``(numpy array, torch dtype name)``, for pickling."""
    cpu = tensor.detach().cpu().contiguous()
    view_dtype = _NUMPY_VIEW_DTYPES.get(cpu.dtype)
    array = (cpu.view(view_dtype) if view_dtype is not None else cpu).numpy()
    return array, str(cpu.dtype).removeprefix("torch.")


def decode_tensor(column: tuple[np.ndarray, str]) -> torch.Tensor:
    array, dtype_name = column
    if not array.flags.writeable:  # zero-copy buffers from Ray's object store are read-only
        array = array.copy()
    tensor = torch.from_numpy(array)
    dtype = getattr(torch, dtype_name)
    return tensor.view(dtype) if tensor.dtype != dtype else tensor


def encode_batch(batch: TensorDict | None) -> dict | None:
    """``{"batch_size": [bs], "device": name or None, "columns": {key: encode_tensor(t)}}`` of ``batch``; nested
    keys are flattened to tuples."""
    if batch is None:
        return None
    device = batch.device
    columns = {}
    for key, tensor in batch.items(include_nested=True, leaves_only=True):
        columns[key] = encode_tensor(tensor)
    return {
        "batch_size": list(batch.batch_size),
        "device": str(device) if device is not None else None,
        "columns": columns,
    }


def decode_batch(encoded: dict | None) -> TensorDict | None:
    """The TensorDict of :func:`encode_batch`, moved back to its device (a CUDA batch stays on CPU without CUDA)."""
    if encoded is None:
        return None
    tensors = {key: decode_tensor(column) for key, column in encoded["columns"].items()}
    batch = TensorDict(source={}, batch_size=encoded["batch_size"])
    for key, tensor in tensors.items():
        batch[key] = tensor
    device = encoded["device"]
    if device is not None and (not device.startswith("cuda") or torch.cuda.is_available()):
        batch = batch.to(device)
    return batch
