"""Built-in policy losses; importing this package registers them."""

from .cispo import compute_policy_loss_cispo
from .covariance import compute_policy_loss_clip_cov, compute_policy_loss_kl_cov
from .geo_mean import compute_policy_loss_geo_mean
from .gpg import compute_policy_loss_gpg
from .gspo import compute_policy_loss_gspo
from .sapo import compute_policy_loss_sapo
from .vanilla import compute_policy_loss_vanilla

__all__ = [
    "compute_policy_loss_cispo",
    "compute_policy_loss_clip_cov",
    "compute_policy_loss_geo_mean",
    "compute_policy_loss_gpg",
    "compute_policy_loss_gspo",
    "compute_policy_loss_kl_cov",
    "compute_policy_loss_sapo",
    "compute_policy_loss_vanilla",
]
