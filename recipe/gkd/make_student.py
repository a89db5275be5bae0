"""Build a smaller student from a teacher by keeping evenly spaced decoder layers (layer-dropped initialisation, as
in DistilBERT), so a run of this recipe has a real teacher-student gap with only the embedded model at hand::

    python -m recipe.gkd.make_student --teacher default --num_layers 8    # prints the student's folder

The student shares the teacher's tokenizer and embeddings; its output is cached under ``$VERL_CACHE_DIR/models``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["kept_layers", "make_student"]


def kept_layers(num_teacher_layers: int, num_layers: int) -> list[int]:
    """Indices of the ``num_layers`` teacher layers to keep: evenly spaced, first and last included."""
    if not 0 < num_layers <= num_teacher_layers:
        raise ValueError(f"num_layers must be in [1, {num_teacher_layers}], got {num_layers}")
    if num_layers == 1:
        return [0]
    step = (num_teacher_layers - 1) / (num_layers - 1)
    return sorted({round(i * step) for i in range(num_layers)})


def make_student(teacher: str, num_layers: int, output: str | None = None) -> str:
    """Write the layer-dropped student of ``teacher`` (a model folder or ``default``) and return its folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verl.utils.default_model import cache_dir
    from verl.utils.fs import write_folder_once
    from verl.workers.config.model import resolve_model_path

    teacher_path = resolve_model_path(teacher)
    target = Path(output) if output else cache_dir() / "models" / f"{Path(teacher_path).name}-student-l{num_layers}"
    if (target / "config.json").exists() and any(target.glob("*.safetensors")):
        return str(target)
    model = AutoModelForCausalLM.from_pretrained(teacher_path, dtype=torch.float32)
    layers = model.model.layers
    keep = kept_layers(len(layers), num_layers)
    model.model.layers = torch.nn.ModuleList([layers[i] for i in keep])
    for new_index, layer in enumerate(model.model.layers):
        if hasattr(layer, "self_attn") and hasattr(layer.self_attn, "layer_idx"):
            layer.self_attn.layer_idx = new_index
    model.config.num_hidden_layers = len(keep)
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = [model.config.layer_types[i] for i in keep]

    def save(folder: Path) -> None:
        model.save_pretrained(folder, safe_serialization=True)
        AutoTokenizer.from_pretrained(teacher_path).save_pretrained(folder)

    return write_folder_once(target, save)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", default="default", help="teacher model folder ('default': embedded SmolLM2)")
    parser.add_argument("--num_layers", type=int, default=8, help="decoder layers the student keeps")
    parser.add_argument("--output", default=None, help="student folder (default: under the verl cache)")
    args = parser.parse_args()
    print(make_student(args.teacher, args.num_layers, args.output))


if __name__ == "__main__":
    main()
