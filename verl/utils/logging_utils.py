"""Log level of verl's own loggers, from verl's ``VERL_LOGGING_LEVEL`` environment variable (default WARNING).

``DEBUG`` also traces the trainer's progress: each step and each phase of it (``gen``, ``reward``, ``update_actor``,
...) as it starts, which shows where a run that seems stuck is.
"""

from __future__ import annotations

import logging
import os
import sys

LEVEL_ENV = "VERL_LOGGING_LEVEL"
"""Environment variable naming the level (``DEBUG``, ``INFO``, ``WARNING``, ...)."""


def configure_verl_logging(level: str | None = None) -> None:
    """Set the ``verl`` logger's level (``level`` or ``$VERL_LOGGING_LEVEL``) and give it a stderr handler once."""
    name = (level or os.environ.get(LEVEL_ENV) or "WARNING").upper()
    if not isinstance(logging.getLevelName(name), int):
        raise ValueError(f"{LEVEL_ENV}={name!r} is not a logging level; use DEBUG, INFO, WARNING or ERROR")
    logger = logging.getLogger("verl")
    logger.setLevel(name)
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
