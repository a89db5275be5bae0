"""On-policy distillation / GKD (verl's ``gkd`` recipe); importing it registers its config schema."""

from recipe.gkd import config as _config  # noqa: F401
