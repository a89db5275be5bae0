"""Gradient accumulation over a mini-batch's micro-batches on FSDP2 without gathering the same parameters twice.

With ``fsdp_config.reshard_after_forward=False`` (verl's key; ZeRO-2-like: a unit's gathered parameters stay from its
forward to its backward), FSDP2 still frees them after each micro-batch's backward and gathers them again in the
next micro-batch's forward. Inside :func:`accumulation` those units keep them until the mini-batch's last backward:
one gather per unit and mini-batch instead of one per micro-batch. The peak memory does not change (the gathered
parameters are all held at the end of every forward anyway), nor does the arithmetic (the same parameters, the same
gradient reductions after each backward). Units that reshard after forward (the default) are left alone.

A pass of forwards alone (log-probs, values, scores under ``torch.no_grad``) keeps such units gathered from its first
forward on: FSDP2 reshards them only in backward. Inside :func:`forward_only` they are resharded when the pass ends,
so their gathered copy does not stay into the next phase (the rollout's generation).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from torch import nn

from verl.workers.engine.fsdp.sharding import fsdp_modules, param_groups

T = TypeVar("T")

__all__ = ["accumulation", "forward_only", "keeps_gathered_after_forward"]


def keeps_gathered_after_forward(unit: nn.Module) -> bool:
    """True when the FSDP2 ``unit`` keeps its gathered parameters after forward (``reshard_after_forward=False``):
    FSDP2 then has no post-forward sharding for any of its parameter groups."""
    groups = param_groups(unit)
    return bool(groups) and all(group.post_forward_mesh_info is None for group in groups)


def _kept_units(module: nn.Module) -> list[nn.Module]:
    return [unit for unit in fsdp_modules(module) if keeps_gathered_after_forward(unit)]


def _set_reshard_after_backward(units: list[nn.Module], value: bool) -> None:
    for unit in units:
        unit.set_reshard_after_backward(value, recurse=False)


@contextmanager
def accumulation(module: nn.Module, micro_batches: Sequence[T]) -> Iterator[Iterator[T]]:
    """``micro_batches`` to run forward and backward on, one after the other, before one optimizer step.

    Units of ``module`` that keep their parameters gathered after forward keep them until the last micro-batch's
    backward, which reshards them as usual. Leaving early (an exception, a ``break``) reshards them and puts FSDP2's
    settings back, so the next step finds the module as before.
    """
    units = _kept_units(module)

    def each() -> Iterator[T]:
        for index, micro_batch in enumerate(micro_batches):
            _set_reshard_after_backward(units, index == len(micro_batches) - 1)
            yield micro_batch

    try:
        yield each()
    finally:
        _set_reshard_after_backward(units, True)
        for unit in units:
            unit.reshard()


@contextmanager
def forward_only(module: nn.Module) -> Iterator[None]:
    """A pass of forwards without backward over ``module``: its units that keep their parameters gathered after
    forward gather once for the whole pass and are resharded on leaving (also on an exception)."""
    units = _kept_units(module)
    try:
        yield
    finally:
        for unit in units:
            unit.reshard()
