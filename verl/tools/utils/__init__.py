"""Tool helpers: building tools from YAML (``tool_registry``) and the local code sandbox (``sandbox``)."""
