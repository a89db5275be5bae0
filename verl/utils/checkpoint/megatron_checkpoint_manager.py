"""Checkpoints of the Megatron engine through ``torch.distributed.checkpoint`` (DCP), in Hugging Face layout.

Layout of ``local_path`` (e.g. ``.../global_step_N/actor``)::

    dist_ckpt/               DCP folder: ``model.<hf name>`` and ``optim.exp_avg|exp_avg_sq.<hf name>``, ``optim.step``
    extra_state_rank_{r}.pt  lr scheduler and RNG states of rank r
    megatron_config.json     world size, parallel sizes, role, architectures (read by the model merger)
    huggingface/             HF config, generation config and tokenizer (plus safetensors with ``hf_model``)

Every tensor is stored as the Hugging Face tensor it belongs to, each rank writing its tensor-parallel slice as a
``DTensor`` shard over its tensor group (:mod:`verl.workers.engine.megatron.hf_shards`); data-parallel replicas
and replicated norms are written once. So a checkpoint saved with one (tensor, pipeline, data) layout loads into
any other, and ``python -m verl.model_merger merge --backend megatron`` reads it without the engine. Adam moments
are stored the same way; with ZeRO-1 each parameter's moments are written by the data-parallel rank that owns
them and read back by whichever rank owns them after the restart. The folder is written atomically; the save /
load frame, the extra state and the rotation are
:class:`~verl.utils.checkpoint.checkpoint_manager.BaseCheckpointManager`'s.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard

from verl.models.mcore.model import named_global_parameters
from verl.models.mcore.weight_converter import is_value_model
from verl.utils.checkpoint.checkpoint_manager import HF_DIR, BaseCheckpointManager, _world
from verl.workers.engine.megatron.hf_shards import HFShard, from_hf_shards, to_hf_shards
from verl.workers.engine.megatron.optim import local_optimizer

DIST_CKPT_DIR = "dist_ckpt"
META_FILE = "megatron_config.json"
MODEL_PREFIX = "model."
ADAM_STATES = ("exp_avg", "exp_avg_sq")


class _Meshes:
    """One 1-D DeviceMesh over the tensor-parallel group per device type (built lazily)."""

    def __init__(self, group):
        self.group = group
        self.meshes: dict[str, DeviceMesh] = {}

    def wrap(self, shard: HFShard) -> torch.Tensor:
        """``shard.local`` as a DTensor over the tensor group (a plain tensor without tensor parallelism)."""
        if dist.get_world_size(self.group) == 1:
            return shard.local
        device = shard.local.device.type
        if device not in self.meshes:
            self.meshes[device] = DeviceMesh.from_group(self.group, device)
        placement = Replicate() if shard.dim is None else Shard(shard.dim)
        local = shard.local.contiguous()
        stride = torch.empty(shard.full_shape, device="meta").stride()
        return DTensor.from_local(
            local, self.meshes[device], [placement], run_check=False, shape=shard.full_shape, stride=stride
        )


def _unwrap(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def _param_entries(engine, include_shared: bool = False):
    """``(global name, parameter, source name)`` of this rank; ``source`` is the tensor a tied copy is stored as."""
    for _, name, param in named_global_parameters(engine.chunks):
        if getattr(param, "shared", False):
            if include_shared:
                yield name, param, "embedding.word_embeddings.weight"
            continue
        yield name, param, name


def _hf_pieces(engine, name: str, tensor: torch.Tensor):
    value_model = is_value_model(engine.hf_config_)
    return to_hf_shards(name, tensor.detach(), engine.hf_config_, engine.ranks.tp_size, value_model)


def model_state(engine, meshes: _Meshes) -> dict[str, torch.Tensor]:
    """``{model.<hf name>: DTensor shard}`` of this rank's parameters."""
    state = {}
    for name, param, _ in _param_entries(engine):
        for hf_name, shard in _hf_pieces(engine, name, param):
            state[MODEL_PREFIX + hf_name] = meshes.wrap(shard)
    return state


def optimizer_state(engine, meshes: _Meshes) -> dict[str, torch.Tensor]:
    """Adam moments of the parameters whose state this rank holds, plus the shared step counter."""
    inner = local_optimizer(engine.optimizer)
    names = {id(param): name for name, param, _ in _param_entries(engine)}
    state: dict[str, torch.Tensor] = {}
    step = None
    for param, entry in inner.state.items():
        if id(param) not in names or not entry:
            continue
        step = entry["step"]
        for kind in ADAM_STATES:
            for hf_name, shard in _hf_pieces(engine, names[id(param)], entry[kind]):
                state[f"optim.{kind}.{hf_name}"] = meshes.wrap(shard)
    if step is not None:
        state["optim.step"] = torch.as_tensor(step, dtype=torch.float32).detach().cpu().reshape(1)
    return state


def _template(engine, meshes: _Meshes, tensors_of) -> tuple[dict[str, torch.Tensor], list]:
    """Empty DTensors for the pieces of ``tensors_of(param)`` (a list of (key prefix, like-tensor)) and a plan
    to fuse them back: ``[(name, target tensor, prefix, [keys])]``."""
    state: dict[str, torch.Tensor] = {}
    plan = []
    for _name, param, source in _param_entries(engine, include_shared=True):
        for prefix, target in tensors_of(param):
            keys = []
            for hf_name, shard in _hf_pieces(engine, source, target):
                key = prefix + hf_name
                shard.local = torch.empty_like(shard.local)
                state[key] = meshes.wrap(shard)
                keys.append(key)
            plan.append((source, target, keys))
    return state, plan


def _fill(engine, state: dict[str, torch.Tensor], plan) -> None:
    with torch.no_grad():
        for source, target, keys in plan:
            pieces = [_unwrap(state[key]).to(target.device) for key in keys]
            target.copy_(from_hf_shards(source, pieces, engine.hf_config_, engine.ranks.tp_size))


def load_model_state(engine, local_path: str) -> None:
    """Fill ``engine``'s parameters from the model tensors of a checkpoint folder (any layout). Collective."""
    folder = os.path.join(local_path, DIST_CKPT_DIR)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder} is missing: {local_path} is not a megatron checkpoint folder")
    meshes = _Meshes(engine.ranks.tp_group)
    state, plan = _template(engine, meshes, lambda p: [(MODEL_PREFIX, p.data)])
    dcp.load(state, checkpoint_id=folder)
    _fill(engine, state, plan)


def load_optimizer_state(engine, local_path: str) -> None:
    """Restore the Adam moments and step of the parameters this rank's optimizer holds. Collective."""
    inner = local_optimizer(engine.optimizer)
    meshes = _Meshes(engine.ranks.tp_group)
    owned = {id(p) for group in inner.param_groups for p in group["params"]}

    def moments(param):
        if id(param) not in owned:
            return []
        entry = inner.state.setdefault(param, {})
        for kind in ADAM_STATES:
            entry.setdefault(kind, torch.zeros_like(param, memory_format=torch.preserve_format))
        return [(f"optim.{kind}.", entry[kind]) for kind in ADAM_STATES]

    state, plan = _template(engine, meshes, moments)
    state["optim.step"] = torch.zeros(1)
    dcp.load(state, checkpoint_id=os.path.join(local_path, DIST_CKPT_DIR))
    _fill(engine, state, plan)
    step = state["optim.step"].reshape(())
    for param in (p for group in inner.param_groups for p in group["params"]):
        if param in inner.state:
            inner.state[param]["step"] = step.clone()


class MegatronCheckpointManager(BaseCheckpointManager):
    """Save/load a :class:`~verl.workers.engine.megatron.engine.MegatronEngine` (model, optimizer, LR schedule,
    RNG); ``processing_class`` is the tokenizer. The parameters are on the device during a save or a load."""

    def __init__(self, engine, processing_class=None, checkpoint_config=None, role: str = "actor"):
        super().__init__(engine.optimizer, engine.lr_scheduler, processing_class, checkpoint_config, role)
        self.engine = engine

    def _on_device(self) -> None:
        self.engine.load_params()

    def _off_device(self) -> None:
        self.engine.offload_params()

    def _save_sharded_state(self, folder: str, contents: set[str]) -> None:
        engine = self.engine
        meshes = _Meshes(engine.ranks.tp_group)
        state = model_state(engine, meshes) if "model" in contents else {}
        if "optimizer" in contents and engine.optimizer is not None:
            state.update(optimizer_state(engine, meshes))
        if state:
            dcp.save(state, checkpoint_id=os.path.join(folder, DIST_CKPT_DIR))

    def _load_sharded_state(self, local_path: str, contents: set[str]) -> None:
        engine = self.engine
        if "model" in contents:
            load_model_state(engine, local_path)
        if "optimizer" in contents and engine.optimizer is not None and self._has_optimizer_state(local_path):
            load_optimizer_state(engine, local_path)

    def _after_lr_scheduler_load(self) -> None:
        # the optimizer's groups hold the lr actually used by the next step (the moments are restored tensor by
        # tensor, not through the optimizer's state dict, so its param_groups are not)
        engine = self.engine
        for group, lr in zip(engine.optimizer.param_groups, engine.lr_scheduler.get_last_lr(), strict=True):
            group["lr"] = lr

    def _iter_full_state_dict(self) -> Iterator[tuple[str, torch.Tensor]]:
        return self.engine.iter_full_state_dict()

    def _save_hf_files(self, folder: str) -> None:
        engine = self.engine
        hf_dir = os.path.join(folder, HF_DIR)
        config = copy.deepcopy(engine.hf_config_)
        config.save_pretrained(hf_dir)
        source = engine.model_config.local_path
        try:
            from transformers import GenerationConfig

            if not is_value_model(config):
                GenerationConfig.from_pretrained(source).save_pretrained(hf_dir)
        except OSError:
            pass
        if self.processing_class is not None:
            self.processing_class.save_pretrained(hf_dir)
        meta = {
            "backend": "megatron",
            "world_size": _world(),
            "role": self.role,
            "architectures": list(config.architectures or []),
            "tensor_model_parallel_size": engine.ranks.tp_size,
            "pipeline_model_parallel_size": engine.ranks.pp_size,
            "virtual_pipeline_model_parallel_size": engine.layout.virtual_pipeline,
        }
        with open(os.path.join(folder, META_FILE), "w") as handle:
            json.dump(meta, handle, indent=2)

    @staticmethod
    def _has_optimizer_state(local_path: str) -> bool:
        from torch.distributed.checkpoint import FileSystemReader

        metadata = FileSystemReader(os.path.join(local_path, DIST_CKPT_DIR)).read_metadata()
        return "optim.step" in metadata.state_dict_metadata
