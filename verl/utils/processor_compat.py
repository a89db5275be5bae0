"""Image-only Hugging Face processors where torchvision cannot be installed (the CPU torch build).

transformers 5 builds every Qwen2-VL-style processor with a video processor, and its video processors need
torchvision; PyPI's torchvision wheels link the CUDA torch libraries and fail to import beside the CPU torch
build. :func:`allow_image_only_processors` lets such a processor load with ``video_processor=None`` (images
work, videos raise), and does nothing where torchvision imports. It is process-wide and idempotent.
"""

from __future__ import annotations

import importlib.util

from transformers.utils import PushToHubMixin

_patched = False


class _NoVideoKwargs:
    """No video keyword arguments are accepted."""


class NoVideoProcessor(PushToHubMixin):
    """The video processor of a processor loaded without torchvision: processing a video raises."""

    valid_kwargs = _NoVideoKwargs

    def to_dict(self) -> dict:
        return {}

    @classmethod
    def from_pretrained(cls, *args, **kwargs) -> NoVideoProcessor:
        return cls()

    def __call__(self, *args, **kwargs):
        raise RuntimeError("videos need a video processor, and transformers builds those with torchvision: install it")


def has_video_processor(processor) -> bool:
    """Whether ``processor`` can process videos."""
    return not isinstance(getattr(processor, "video_processor", None), (NoVideoProcessor, type(None)))


def torchvision_available() -> bool:
    """True when torchvision imports (its compiled operators included)."""
    if importlib.util.find_spec("torchvision") is None:
        return False
    from transformers.utils import is_torchvision_available

    return bool(is_torchvision_available())


def allow_image_only_processors() -> bool:
    """Without torchvision, make processors load with a :class:`NoVideoProcessor`; True if it patched."""
    global _patched
    if _patched or torchvision_available():
        return _patched
    import transformers.processing_utils as processing_utils

    check_argument = processing_utils.ProcessorMixin.check_argument_for_proper_class
    auto_getitem = processing_utils._LazyAutoProcessorMapping.__getitem__

    def check_argument_for_proper_class(self, argument_name, argument):
        if argument_name == "video_processor" and isinstance(argument, NoVideoProcessor):
            return NoVideoProcessor
        return check_argument(self, argument_name, argument)

    def auto_class_for(self, key):
        return NoVideoProcessor if key == "video_processor" else auto_getitem(self, key)

    processing_utils.ProcessorMixin.check_argument_for_proper_class = check_argument_for_proper_class
    processing_utils._LazyAutoProcessorMapping.__getitem__ = auto_class_for
    _patched = True
    return True


_VLLM_VISION_ARCHITECTURES = {
    "Qwen2VLForConditionalGeneration": "vllm.model_executor.models.qwen2_vl",
    "Qwen2_5_VLForConditionalGeneration": "vllm.model_executor.models.qwen2_5_vl",
}
_vllm_registered = False


def register_vllm_vision_models_without_torchvision() -> bool:
    """Make vLLM's own Qwen2-VL / Qwen2.5-VL models load in this process without torchvision; True if it acted.

    vLLM's model files import ``smart_resize`` from transformers' torchvision image processor module, and vLLM
    inspects model classes in a fresh subprocess. Here the import is served by the PIL image processor module
    (same function) and the classes are registered in-process, so vLLM inspects them here. Needs the engine in
    this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, as the rollout runs it). No-op where torchvision imports.
    """
    global _vllm_registered
    if _vllm_registered or torchvision_available():
        return _vllm_registered
    import importlib
    import sys

    allow_image_only_processors()
    torchvision_module = "transformers.models.qwen2_vl.image_processing_qwen2_vl"
    if torchvision_module not in sys.modules:
        sys.modules[torchvision_module] = importlib.import_module(
            "transformers.models.qwen2_vl.image_processing_pil_qwen2_vl"
        )
    from vllm import ModelRegistry

    for architecture, module_name in _VLLM_VISION_ARCHITECTURES.items():
        ModelRegistry.register_model(architecture, getattr(importlib.import_module(module_name), architecture))
    _vllm_registered = True
    return True
