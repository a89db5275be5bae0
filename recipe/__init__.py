"""Recipes: end-to-end setups reproducing published algorithms (``python -m recipe.<name>.main_<name>``)."""
