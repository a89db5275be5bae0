"""Image-only Hugging Face processors where torchvision cannot be installed (the CPU torch build).

transformers 5 builds every Qwen2-VL-style processor with a video processor, and its video processors need
torchvision; PyPI's torchvision wheels link the CUDA torch libraries and fail to import beside the CPU torch
build. :func:`allow_image_only_processors` lets such a processor load with ``video_processor=None`` (images
work, videos raise), and does nothing where torchvision imports. It is process-wide and idempotent.
"""

from __future__ import annotations

import importlib.util

_patched = False


class _NoVideoProcessor:
    """Stands in for ``AutoVideoProcessor`` without torchvision: loading yields ``None``."""

    @classmethod
    def from_pretrained(cls, *args, **kwargs) -> None:
        return None


def torchvision_available() -> bool:
    """True when torchvision imports (its compiled operators included)."""
    if importlib.util.find_spec("torchvision") is None:
        return False
    from transformers.utils import is_torchvision_available

    return bool(is_torchvision_available())


def allow_image_only_processors() -> bool:
    """Without torchvision, make processors accept and load ``video_processor=None``; True if it patched."""
    global _patched
    if _patched or torchvision_available():
        return _patched
    import transformers.processing_utils as processing_utils

    check_argument = processing_utils.ProcessorMixin.check_argument_for_proper_class
    auto_getitem = processing_utils._LazyAutoProcessorMapping.__getitem__

    def check_argument_for_proper_class(self, argument_name, argument):
        if argument_name == "video_processor" and argument is None:
            return None
        return check_argument(self, argument_name, argument)

    def auto_class_for(self, key):
        return _NoVideoProcessor if key == "video_processor" else auto_getitem(self, key)

    processing_utils.ProcessorMixin.check_argument_for_proper_class = check_argument_for_proper_class
    processing_utils._LazyAutoProcessorMapping.__getitem__ = auto_class_for
    _patched = True
    return True
