"""The process-wide DataProto switches (:class:`DataProtoConfig`) and the per-batch auto-padding key."""

from __future__ import annotations

import os
from typing import Any

AUTO_PADDING_KEY = "_verl_auto_padding"
"""``meta_info`` key (and :class:`DataProtoConfig` entry) that enables auto-padding for one DataProto."""


class _DataProtoConfigMeta(type):
    _config: dict[str, Any] = {}
    auto_padding_key = AUTO_PADDING_KEY

    @property
    def auto_padding(cls) -> bool:
        """Global auto-padding: ``DataProtoConfig.auto_padding = True`` or the env ``VERL_AUTO_PADDING=1|true``."""
        enabled_by_env = os.getenv("VERL_AUTO_PADDING", "FALSE").upper() in ("TRUE", "1")
        return enabled_by_env or bool(cls._config.get(AUTO_PADDING_KEY, False))

    @auto_padding.setter
    def auto_padding(cls, enabled: bool) -> None:
        cls._config[AUTO_PADDING_KEY] = bool(enabled)


class DataProtoConfig(metaclass=_DataProtoConfigMeta):
    """Process-wide DataProto switches. With auto-padding on, ``DataProto.chunk(k)`` accepts a length that ``k``
    does not divide and returns ``torch.chunk``-sized parts (the first ones one row longer)."""
