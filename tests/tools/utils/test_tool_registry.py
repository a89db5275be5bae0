"""Tool YAML in verl's format: built into tools, and every malformed file rejected naming the entry and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from verl.tools.calculator_tool import CalculatorTool
from verl.tools.gsm8k_tool import Gsm8kTool
from verl.tools.utils.tool_registry import initialize_tools_from_config

REPO = Path(__file__).resolve().parents[3]
GSM8K_CONFIG = REPO / "examples" / "agent_loop" / "config" / "tool_config" / "gsm8k_tool_config.yaml"


def write(tmp_path, text: str) -> str:
    path = tmp_path / "tools.yaml"
    path.write_text(text)
    return str(path)


def test_builds_the_shipped_tool_configs():
    tools = initialize_tools_from_config(str(GSM8K_CONFIG))
    assert [type(t) for t in tools] == [Gsm8kTool] and tools[0].name == "calc_gsm8k_reward"
    schema = tools[0].tool_schema.model_dump(exclude_unset=True, exclude_none=True)
    assert schema["function"]["parameters"]["required"] == ["answer"]
    folder = GSM8K_CONFIG.parent
    assert isinstance(initialize_tools_from_config(str(folder / "calculator_tool_config.yaml"))[0], CalculatorTool)
    code_tool = initialize_tools_from_config(str(folder / "code_executor_tool_config.yaml"))[0]
    assert code_tool.name == "code_interpreter" and code_tool.limits.memory_mb == 512


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tool: []", "top-level 'tools:' list"),
        ("tools:\n  - config: {}", "needs a 'class_name'"),
        ("tools:\n  - class_name: verl.tools.gsm8k_tool.Gsm8kTool\n    schema: {}", "unknown keys \\['schema'\\]"),
        ("tools:\n  - class_name: verl.tools.calculator_tool.CalculatorTool\n    config: {type: mcp}", "not available"),
        ("tools:\n  - class_name: verl.tools.gsm8k_tool.NoSuchTool", "has no class 'NoSuchTool'"),
        ("tools:\n  - class_name: verl.protocol.DataProto", "not a subclass of verl.tools.base_tool.BaseTool"),
        (
            "tools:\n  - class_name: verl.tools.gsm8k_tool.Gsm8kTool\n    tool_schema: {type: function}",
            "not an OpenAI function schema",
        ),
        (
            "tools:\n"
            + "  - class_name: verl.tools.gsm8k_tool.Gsm8kTool\n    tool_schema: {function: {name: same}}\n" * 2,
            "appear more than once",
        ),
    ],
)
def test_malformed_files_name_the_problem(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ValueError, match=message) as info:
        initialize_tools_from_config(path)
    assert path in str(info.value) or "has no class" in str(info.value)


def test_missing_file_names_the_key(tmp_path):
    with pytest.raises(ValueError, match="tool_config_path=.*is not a file"):
        initialize_tools_from_config(str(tmp_path / "absent.yaml"))
