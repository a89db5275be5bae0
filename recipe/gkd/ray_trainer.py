"""``OnPolicyDistillTrainer``: the student generates, the teacher scores every response token, the student moves
towards the teacher (GKD with student-generated data only, λ = 1; Agarwal et al., arXiv:2306.13649).

One step::

    prompts -> student samples (rollout) -> rule reward (reported, not trained on)
    -> teacher top-k log-probs per response token -> old log-probs (skipped on an on-policy step: the update
       reports the entropy)
    -> student update on the divergence (actor_rollout_ref.actor.distill)
"""

from __future__ import annotations

from verl.protocol import DataProto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.utils.profiler import marked_timer

TEACHER_GROUP = "teacher"


class OnPolicyDistillTrainer(RayPPOTrainer):
    """:class:`RayPPOTrainer` with a ``teacher`` worker group and the student's distillation update."""

    def _worker_group_names(self) -> dict:
        return {TEACHER_GROUP: (TEACHER_GROUP, None, None)}

    def init_workers(self) -> None:
        super().init_workers()
        self.teacher_wg = self.worker_groups[TEACHER_GROUP]

    def _learn(self, batch: DataProto, timing_raw: dict, metrics: dict) -> DataProto:
        """Teacher top-k, then the PPO phases (advantages are computed and reported; the update ignores them)."""
        with marked_timer("teacher", timing_raw):
            batch = batch.union(self.teacher_wg.compute_teacher_topk(batch))
        return super()._learn(batch, timing_raw, metrics)
