"""Pieces of the SFT trainer (``verl.trainer.fsdp_sft_trainer``): process group, data, loss, checkpoints."""
