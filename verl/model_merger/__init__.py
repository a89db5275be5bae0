"""Turn training checkpoints into Hugging Face models: ``python -m verl.model_merger merge --backend fsdp ...``."""
