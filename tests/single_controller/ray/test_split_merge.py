"""verl's ``single_controller.ray.base`` helpers: split one pool's ranks between worker groups, merge two pools into
one, and the raw colocated class."""

import pytest
import ray

from tests.single_controller.ray.light_workers import ActorRole, CriticRole, NodeReporter
from verl.single_controller.ray.base import (
    RayClassWithInitArgs,
    RayResourcePool,
    RayWorkerGroup,
    create_colocated_worker_raw_cls,
    merge_resource_pool,
    split_resource_pool,
)


@pytest.fixture(scope="module")
def ray_cluster():
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_split_views_cover_the_ranks_in_order():
    pool = RayResourcePool([4], use_gpu=False, max_colocate_count=1)
    halves = split_resource_pool(pool, 2)
    assert [(v.start_bundle_index, v.world_size) for v in halves] == [(0, 2), (2, 2)]
    uneven = split_resource_pool(pool, [1, 3])
    assert [(v.start_bundle_index, v.world_size) for v in uneven] == [(0, 1), (1, 3)]
    again = split_resource_pool(uneven[1], [2, 1])  # a view splits again, relative to the parent's ranks
    assert [(v.start_bundle_index, v.world_size) for v in again] == [(1, 2), (3, 1)]
    with pytest.raises(ValueError, match="divide"):
        split_resource_pool(pool, 3)
    with pytest.raises(ValueError, match="sum to"):
        split_resource_pool(pool, [1, 1])


def test_groups_on_split_halves_get_their_own_ranks(ray_cluster):
    pool = RayResourcePool([4], use_gpu=False, max_colocate_count=1, cpus_per_bundle=0.5)
    first, second = split_resource_pool(pool, 2)
    groups = [RayWorkerGroup(view, RayClassWithInitArgs(NodeReporter)) for view in (first, second)]
    for group in groups:
        assert group.world_size == 2
        assert [p["rank"] for p in group.placement()] == [0, 1]
        assert group.all_reduce_rank_squares() == [1.0, 1.0]  # each half rendezvous alone: 0^2 + 1^2
    # the views' workers sit on four distinct bundles of the one reservation
    assert len(pool.get_placement_groups()) == 1
    for group in groups:
        for worker in group.workers:
            ray.kill(worker)
    pool.remove_placement_groups()


def test_merged_pool_spawns_over_both(ray_cluster):
    left = RayResourcePool([1], use_gpu=False, max_colocate_count=1, cpus_per_bundle=0.5, name_prefix="l")
    right = RayResourcePool([1], use_gpu=False, max_colocate_count=1, cpus_per_bundle=0.5, name_prefix="r")
    merged = merge_resource_pool(left, right)
    assert merged.world_size == 2 and merged.store == [1, 1]
    group = RayWorkerGroup(merged, RayClassWithInitArgs(NodeReporter))
    assert [p["rank"] for p in group.placement()] == [0, 1]
    for worker in group.workers:
        ray.kill(worker)
    for pool in (left, right):
        pool.remove_placement_groups()


def test_raw_colocated_class_is_a_plain_class():
    raw = create_colocated_worker_raw_cls(
        {"actor": RayClassWithInitArgs(ActorRole, step_size=2), "critic": RayClassWithInitArgs(CriticRole, offset=1)}
    )
    assert isinstance(raw, type) and not hasattr(raw, "remote")
    assert callable(raw.actor_step) and callable(raw.critic_where)
