"""One-step off-policy PPO (verl's ``one_step_off_policy`` recipe); importing it registers its config schema."""

from recipe.one_step_off_policy import config as _config  # noqa: F401
