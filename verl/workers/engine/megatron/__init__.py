"""Megatron training engine: megatron-core tensor/pipeline parallel models behind the same role interface as FSDP2.

Importing this package does not import megatron-core (the engine module does, when it is built).
"""
