"""Interaction helpers: building interactions from YAML (``interaction_registry``)."""
