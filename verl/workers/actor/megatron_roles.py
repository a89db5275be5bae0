"""The policy-side roles on the Megatron engine: the trained actor and the frozen reference policy.

Same interface as :mod:`verl.workers.actor.roles` (the FSDP roles), so the worker composing them is the only
place that knows which engine runs. Batch sizes are per **data-parallel** rank: ``world / (tp * pp)`` ranks.
"""

from __future__ import annotations

from verl.utils.checkpoint.megatron_checkpoint_manager import MegatronCheckpointManager
from verl.workers.actor.megatron_actor import MegatronPPOActor
from verl.workers.actor.role_utils import make_flops_counter, per_rank_mini_batch_size, with_fields
from verl.workers.actor.roles import ActorRoleBase, ReferenceRoleBase
from verl.workers.engine.megatron.engine import MegatronEngine


class MegatronActorRole(ActorRoleBase):
    """The trained policy: Megatron engine + ``MegatronPPOActor`` + checkpoints + MFU accounting."""

    optimizer_on_device_to_save = True

    def __init__(self, model_config, actor_config, tokenizer, rollout_n: int = 1):
        self.engine = MegatronEngine(model_config, actor_config.megatron, actor_config.optim, role="actor").initialize()
        mini = per_rank_mini_batch_size(actor_config, rollout_n, self.engine.dp_size, "actor_rollout_ref.actor")
        self.config = with_fields(actor_config, ppo_mini_batch_size=mini)
        self.actor = MegatronPPOActor(self.config, self.engine)
        self.checkpoint_manager = MegatronCheckpointManager(self.engine, tokenizer, actor_config.checkpoint)
        self.flops_counter = make_flops_counter(self.engine.hf_config())
        self.last_metrics: dict = {}


class MegatronReferenceRole(ReferenceRoleBase):
    """The frozen reference policy: its own Megatron engine (no optimizer, weights in the compute dtype)."""

    def __init__(self, model_config, ref_config):
        self.engine = MegatronEngine(model_config, ref_config.megatron, None, role="ref").initialize()
        self.config = ref_config
        self.actor = MegatronPPOActor(ref_config, self.engine)
        self.flops_counter = make_flops_counter(self.engine.hf_config())
        self.last_metrics: dict = {}
