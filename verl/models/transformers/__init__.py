"""Helpers for Hugging Face ``transformers`` model families."""
