"""``CodeExecutorTool``: runs the model's Python code in a local sandbox and returns its output.

Schema default: ``code_interpreter`` with one string parameter ``code`` (the name verl's sandbox tools use). The
YAML ``config`` may set the limits of :class:`~verl.tools.utils.sandbox.SandboxLimits` (``timeout_s``,
``cpu_time_s``, ``memory_mb``, ``max_output_bytes``, ``max_file_mb``, ``max_processes``, ``max_open_files``) and
``num_workers``, the runs allowed at once per agent-loop worker. A run that times out, runs out of memory or
breaks a rule returns an error message; the rollout goes on.
"""

from __future__ import annotations

import asyncio
from typing import Any

from verl.tools.base_tool import BaseTool
from verl.tools.gsm8k_tool import parse_parameters
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.tools.utils.sandbox import SandboxLimits, run_python

DEFAULT_SCHEMA = {
    "type": "function",
    "function": {
        "name": "code_interpreter",
        "description": "Run Python code and see what it prints (no network; files only in the working directory).",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The Python code to run."}},
            "required": ["code"],
        },
    },
}
CONFIG_KEYS = {"type", "num_workers"} | set(SandboxLimits.__dataclass_fields__)


class CodeExecutorTool(BaseTool):
    """Python execution in :func:`verl.tools.utils.sandbox.run_python` under the configured limits."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None):
        super().__init__(config, tool_schema or OpenAIFunctionToolSchema.model_validate(DEFAULT_SCHEMA))
        unknown = sorted(set(self.config) - CONFIG_KEYS)
        if unknown:
            raise ValueError(f"CodeExecutorTool config has unknown keys {unknown}; allowed: {sorted(CONFIG_KEYS)}")
        self.limits = SandboxLimits.from_config(self.config)
        self.num_workers = int(self.config.get("num_workers", 4))
        self._slots: asyncio.Semaphore | None = None

    async def execute(self, instance_id: str, parameters: Any, **kwargs) -> tuple[ToolResponse, float, dict]:
        code = parse_parameters(parameters).get("code")
        if not isinstance(code, str) or not code.strip():
            return ToolResponse(text="Error: the call needs a non-empty string argument 'code'"), 0.0, {"error": 1.0}
        if self._slots is None:  # created here so it belongs to the running event loop
            self._slots = asyncio.Semaphore(self.num_workers)
        async with self._slots:
            result = await run_python(code, self.limits)
        metrics = {"timed_out": float(result.timed_out), "error": float(not result.ok)}
        return ToolResponse(text=result.message(self.limits) or "(no output)"), 0.0, metrics
