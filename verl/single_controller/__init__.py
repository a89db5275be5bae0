"""Single controller: the driver holds the training loop, workers on each device hold the models.

``base`` has the backend-independent worker, ``@register`` and worker group; ``ray`` runs them on a Ray cluster.
"""

from verl.single_controller.base import ClassWithInitArgs, ResourcePool, Worker, WorkerGroup

__all__ = ["ClassWithInitArgs", "ResourcePool", "Worker", "WorkerGroup"]
