"""The generative judge: prompt template (``prompts``), judgment parsers (``parsers``), generation engines
(``engines``), where the engine runs (``server``) and the scoring with its failure counters (``judge``)."""

from verl.workers.reward_model.judge.parsers import (
    JUDGMENT_PARSER_REGISTRY,
    get_judgment_parser,
    register_judgment_parser,
)

__all__ = ["JUDGMENT_PARSER_REGISTRY", "get_judgment_parser", "register_judgment_parser"]
