"""The collector's pauses are measured and the heap is frozen once, after warm-up, without stopping later garbage
from being collected (verl.utils.gc_heap)."""

from __future__ import annotations

import gc
import weakref

import pytest

from verl.utils import gc_heap
from verl.utils.gc_heap import GcPauses, HeapFreezer


class Node:
    def __init__(self) -> None:
        self.other = None


def make_cycle() -> weakref.ref:
    """A two-node reference cycle with no outside reference; only the cyclic collector can free it."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_pauses_count_each_generation_of_forced_collections():
    with GcPauses() as pauses:
        gc.collect(0)
        gc.collect(2)
        gc.collect(2)
    assert pauses.count[0] >= 1 and pauses.count[2] >= 2
    assert pauses.pause_s[2] > 0.0
    metrics = pauses.metrics("rollout/")
    assert metrics["rollout/gc_full_collections"] == float(pauses.count[2])
    assert metrics["rollout/gc_pause_s"] == pytest.approx(sum(pauses.pause_s))
    gc.collect(2)  # outside the block: not counted, and the callback is gone
    assert pauses.count[2] == metrics["rollout/gc_full_collections"]
    assert pauses._on_gc not in gc.callbacks


def test_freezes_on_the_second_training_generation_only(unfrozen):
    freezer = HeapFreezer(warmup=1, enabled=True)
    assert freezer.before_generation(validate=True) == 0.0  # validation before training does not count
    assert freezer.before_generation() == 0.0 and gc.get_freeze_count() == 0
    alive = [Node() for _ in range(1000)]
    assert freezer.before_generation() > 0.0
    frozen = gc.get_freeze_count()
    assert frozen >= len(alive)
    assert freezer.frozen_objects >= frozen  # counted once, when it froze (a frozen object may die since)
    later = [Node() for _ in range(1000)]
    assert freezer.before_generation() == 0.0  # once only: objects made after the freeze stay collectable
    assert gc.get_freeze_count() < frozen + len(later)  # (frozen objects may still die by reference count)


def test_the_first_update_freezes_and_later_generations_do_not_freeze_again(unfrozen):
    freezer = HeapFreezer(warmup=1, enabled=True)
    assert freezer.before_generation() == 0.0 and gc.get_freeze_count() == 0  # the hybrid step: generate first
    assert freezer.frozen_objects == 0
    alive = [Node() for _ in range(1000)]
    assert freezer.after_update() > 0.0  # then the first update returns: the heap is frozen there
    frozen = gc.get_freeze_count()
    assert frozen >= len(alive)
    assert freezer.after_update() == 0.0
    assert freezer.before_generation() == 0.0  # the second generation, a rollout-only worker's moment: nothing more
    assert gc.get_freeze_count() <= frozen


def test_garbage_from_before_and_after_the_freeze_is_still_freed(unfrozen):
    freezer = HeapFreezer(warmup=0, enabled=True)
    gc.disable()
    try:
        before = make_cycle()  # garbage when the freeze comes: its collection frees it first
        freezer.before_generation()
        assert before() is None
        after = make_cycle()
        assert after() is not None
        gc.collect()
        assert after() is None
    finally:
        gc.enable()


def test_env_turns_the_freeze_off(monkeypatch, unfrozen):
    monkeypatch.setenv(gc_heap.FREEZE_ENV, "0")
    freezer = HeapFreezer(warmup=0)
    assert freezer.before_generation() == 0.0 and not freezer.frozen and gc.get_freeze_count() == 0
    assert freezer.after_update() == 0.0 and not freezer.frozen and gc.get_freeze_count() == 0


def test_main_ppo_forwards_the_switch_to_its_workers(monkeypatch):
    from omegaconf import OmegaConf

    from verl.trainer.main_ppo import _ray_init_kwargs

    monkeypatch.setenv(gc_heap.FREEZE_ENV, "0")
    config = OmegaConf.create({"ray_kwargs": {"ray_init": {"num_cpus": 1}}, "trainer": {"seed": 1}})
    assert _ray_init_kwargs(config)["runtime_env"]["env_vars"][gc_heap.FREEZE_ENV] == "0"
