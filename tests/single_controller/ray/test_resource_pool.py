"""Resource pools on a simulated two-node cluster (``ray.cluster_utils.Cluster``: two raylets on this machine):
pools land on different nodes, one pool spans both nodes with node-local ranks, and gloo rendezvous works across
them."""

import pytest
import ray
from ray.cluster_utils import Cluster

from tests.single_controller.ray.light_workers import NodeReporter
from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup, ResourcePoolManager

CPUS_PER_NODE = 2


@pytest.fixture(scope="module")
def two_node_cluster():
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": CPUS_PER_NODE, "include_dashboard": False},
    )
    worker_node = cluster.add_node(num_cpus=CPUS_PER_NODE)
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    yield cluster, cluster.head_node.node_id, worker_node.node_id
    ray.shutdown()
    cluster.shutdown()


def test_role_pools_are_placed_on_separate_nodes(two_node_cluster):
    _, head_id, worker_id = two_node_cluster
    manager = ResourcePoolManager(
        resource_pool_spec={"train_pool": [CPUS_PER_NODE], "reward_pool": [CPUS_PER_NODE]},
        mapping={"actor_rollout": "train_pool", "critic": "train_pool", "reward_model": "reward_pool"},
    )
    manager.create_resource_pool()
    assert manager.get_n_gpus() == 4
    train, reward = manager.get_resource_pool("critic"), manager.get_resource_pool("reward_model")
    assert manager.get_resource_pool("actor_rollout") is train and train.use_gpu is False
    train_nodes, reward_nodes = set(train.bundle_node_ids()), set(reward.bundle_node_ids())
    # Each pool fills one whole node (STRICT_PACK), so the two pools must sit on different nodes.
    assert len(train_nodes) == len(reward_nodes) == 1
    assert train_nodes | reward_nodes == {head_id, worker_id}
    for pool in (train, reward):
        pool.remove_placement_groups()

    with pytest.raises(ValueError, match="need 6 CPUs"):
        ResourcePoolManager(resource_pool_spec={"big": [3, 3]}, mapping={"actor": "big"}).create_resource_pool()
    with pytest.raises(KeyError, match="no resource pool"):
        manager.get_resource_pool("ref")


def test_pool_spanning_two_nodes_rendezvous_and_all_reduce(two_node_cluster):
    _, head_id, worker_id = two_node_cluster
    pool = RayResourcePool([CPUS_PER_NODE, CPUS_PER_NODE], use_gpu=False, max_colocate_count=1)
    group = RayWorkerGroup(pool, RayClassWithInitArgs(NodeReporter))
    placements = group.placement()
    assert [p["rank"] for p in placements] == [0, 1, 2, 3]
    assert [p["local_rank"] for p in placements] == [0, 1, 0, 1]
    assert all(p["local_world_size"] == 2 for p in placements)
    nodes = [p["node_id"] for p in placements]
    assert nodes[0] == nodes[1] and nodes[2] == nodes[3] and {nodes[0], nodes[2]} == {head_id, worker_id}
    assert len({tuple(p["master"]) for p in placements}) == 1  # every rank got rank 0's address
    assert group.all_reduce_rank_squares() == [float(0 + 1 + 4 + 9)] * 4
