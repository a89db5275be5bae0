"""PRIME: process reinforcement through implicit rewards (verl's ``prime`` recipe); importing it registers its config
schema."""

from recipe.prime import config as _config  # noqa: F401
