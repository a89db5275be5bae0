"""SPIN: self-play fine-tuning on SFT data (verl's ``spin`` recipe); importing it registers its config schema."""

from recipe.spin import config as _config  # noqa: F401
