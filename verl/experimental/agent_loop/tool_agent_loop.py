"""``tool_agent``: multi-turn rollouts where the model calls tools and (optionally) a simulated user answers.

States of one trajectory::

    GENERATING --tool calls--> PROCESSING_TOOLS --> GENERATING
    GENERATING --no call, interaction--> INTERACTING --> GENERATING (or the interaction ends the episode)
    GENERATING --no call, no interaction / EOS missing / a budget reached--> TERMINATED

Model turns are appended as sampled (``response_mask`` 1, their engine log-probs); tool results and user turns
as the chat template's text (``response_mask`` 0, log-prob 0). Limits: ``response_length`` over the whole
response (a turn that would cross it is not added), ``max_assistant_turns``, ``max_user_turns`` (tool and user
turns), ``max_parallel_calls`` per model turn, and ``max_tool_response_length`` characters per tool result.
Tool instances live for the trajectory: created at their first call with the row's
``tools_kwargs[name].create_kwargs``, released at the end.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
from verl.experimental.agent_loop.chat import ChatTemplate, timer, truncate_text
from verl.experimental.agent_loop.tool_parser import FunctionCall, ToolParser
from verl.tools.schemas import ToolResponse

logger = logging.getLogger(__name__)


class AgentState(Enum):
    GENERATING = "generating"
    PROCESSING_TOOLS = "processing_tools"
    INTERACTING = "interacting"
    TERMINATED = "terminated"


@dataclass
class AgentData:
    """The state of one trajectory."""

    request_id: str
    messages: list[dict[str, Any]]
    tools_kwargs: dict[str, Any]
    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    response_logprobs: list[float] | None = field(default_factory=list)  # None once a turn came without them
    tool_calls: list[FunctionCall] = field(default_factory=list)
    tool_instances: dict[str, str] = field(default_factory=dict)
    interaction: Any = None
    interaction_kwargs: dict[str, Any] = field(default_factory=dict)
    assistant_turns: int = 0
    user_turns: int = 0
    turn_scores: list[float] = field(default_factory=list)
    tool_rewards: list[float] = field(default_factory=list)
    num_tool_calls: int = 0
    num_tool_errors: int = 0
    metrics: dict[str, float] = field(default_factory=dict)


@register("tool_agent")
class ToolAgentLoop(AgentLoopBase):
    """See the module docstring; tools and interactions come from ``rollout.multi_turn``."""

    _warned_mismatch = False

    @classmethod
    def init_class(cls, config: Any, tokenizer: Any, processor: Any, **kwargs) -> None:
        if cls._class_initialized:
            return
        from verl.interactions.utils.interaction_registry import initialize_interactions_from_config
        from verl.tools.utils.tool_registry import initialize_tools_from_config

        rollout = config.actor_rollout_ref.rollout
        multi_turn = rollout.multi_turn
        cls.multi_turn = multi_turn
        cls.prompt_length = int(rollout.prompt_length)
        cls.response_length = int(rollout.response_length)
        tools = initialize_tools_from_config(multi_turn.tool_config_path) if multi_turn.tool_config_path else []
        cls.tools = {tool.name: tool for tool in tools}
        cls.tool_schemas = [tool.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for tool in tools]
        cls.tool_parser = ToolParser.get_tool_parser(multi_turn.format, tokenizer)
        path = multi_turn.interaction_config_path
        cls.interaction_map = initialize_interactions_from_config(path) if path else {}
        cls.chat = ChatTemplate(
            tokenizer,
            cls.tool_schemas,
            cls.tool_parser.tools_prompt(cls.tool_schemas) if cls.tool_schemas else None,
            dict(config.data.apply_chat_template_kwargs or {}),
        )
        cls._class_initialized = True

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        if "raw_prompt" not in kwargs:
            raise ValueError("tool_agent needs the chat messages of each row: set data.return_raw_chat=True")
        data = AgentData(
            request_id=uuid4().hex,
            messages=[dict(message) for message in kwargs["raw_prompt"]],
            tools_kwargs=dict(kwargs.get("tools_kwargs") or {}),
        )
        data.prompt_ids = await self.loop.run_in_executor(None, self.chat.prompt_ids, data.messages)
        if len(data.prompt_ids) > self.prompt_length:
            raise ValueError(
                f"a prompt with the tool instructions is {len(data.prompt_ids)} tokens, more than "
                f"rollout.prompt_length={self.prompt_length}; raise data.max_prompt_length"
            )
        await self._start_interaction(data, kwargs)
        try:
            state = AgentState.GENERATING
            while state != AgentState.TERMINATED:
                if state == AgentState.GENERATING:
                    state = await self._generate(data, sampling_params)
                elif state == AgentState.PROCESSING_TOOLS:
                    state = await self._process_tools(data)
                else:
                    state = await self._interact(data)
        finally:
            await self._release(data)
        return self._output(data)

    # ------------------------------------------------------------------ states

    async def _generate(self, data: AgentData, sampling_params: dict[str, Any]) -> AgentState:
        budget = self.response_length - len(data.response_ids)
        if budget <= 0:
            return AgentState.TERMINATED
        with timer("generate_sequences", data.metrics):
            output = await self.server_manager.generate(
                request_id=data.request_id,
                prompt_ids=data.prompt_ids + data.response_ids,
                sampling_params={**sampling_params, "max_tokens": budget},
            )
        tokens = list(output.token_ids)[:budget]
        data.response_ids += tokens
        data.response_mask += [1] * len(tokens)
        if output.log_probs is None or data.response_logprobs is None:
            data.response_logprobs = None
        else:
            data.response_logprobs += list(output.log_probs)[: len(tokens)]
        data.assistant_turns += 1
        content = self.chat.assistant_content(tokens)
        data.messages.append({"role": "assistant", "content": content})
        if output.stop_reason != "stop" or len(data.response_ids) >= self.response_length:  # no EOS: cannot go on
            return AgentState.TERMINATED
        if self.multi_turn.max_assistant_turns and data.assistant_turns >= self.multi_turn.max_assistant_turns:
            return AgentState.TERMINATED
        if self.multi_turn.max_user_turns and data.user_turns >= self.multi_turn.max_user_turns:
            return AgentState.TERMINATED
        data.tool_calls = self.tool_parser.parse(content)[1] if self.tools else []
        if data.tool_calls:
            return AgentState.PROCESSING_TOOLS
        return AgentState.INTERACTING if data.interaction is not None else AgentState.TERMINATED

    async def _process_tools(self, data: AgentData) -> AgentState:
        calls = data.tool_calls[: self.multi_turn.max_parallel_calls]
        with timer("tool_calls", data.metrics):
            responses = await asyncio.gather(*(self._call_tool(data, call) for call in calls))
        messages = [{"role": "tool", "content": response.text or ""} for response in responses]
        data.messages.extend(messages)
        return self._append_turn(data, messages)

    async def _interact(self, data: AgentData) -> AgentState:
        done, reply, score, _ = await data.interaction.generate_response(
            data.request_id, data.messages, **data.interaction_kwargs
        )
        if score is not None:
            data.turn_scores.append(float(score))
        if done:  # the episode ends on the model's turn, so the last response token is a sampled one
            return AgentState.TERMINATED
        message = {"role": "user", "content": reply}
        data.messages.append(message)
        return self._append_turn(data, [message])

    def _append_turn(self, data: AgentData, messages: list[dict[str, Any]]) -> AgentState:
        """Add a tool/user turn (masked out of the loss) if it and one more model token fit the budget."""
        ids = self.chat.turn_ids(messages)
        if len(data.response_ids) + len(ids) >= self.response_length:
            return AgentState.TERMINATED
        data.response_ids += ids
        data.response_mask += [0] * len(ids)
        if data.response_logprobs is not None:
            data.response_logprobs += [0.0] * len(ids)
        data.user_turns += 1
        return AgentState.GENERATING

    # ------------------------------------------------------------------ tools and interactions

    async def _call_tool(self, data: AgentData, call: FunctionCall) -> ToolResponse:
        """Run one call; every failure becomes an error message for the model."""
        if call.error is None and call.name not in self.tools:
            call = call.model_copy(update={"error": f"unknown tool {call.name!r}; available: {sorted(self.tools)}"})
        if call.error is not None:
            data.num_tool_errors += 1
            return ToolResponse(text=f"Error: {call.error}")
        tool = self.tools[call.name]
        data.num_tool_calls += 1
        try:
            if call.name not in data.tool_instances:
                create_kwargs = (data.tools_kwargs.get(call.name) or {}).get("create_kwargs") or {}
                created = await tool.create(**create_kwargs)
                data.tool_instances[call.name] = created[0] if isinstance(created, tuple) else created
            execute_kwargs = (data.tools_kwargs.get(call.name) or {}).get("execute_kwargs") or {}
            response, reward, _ = await tool.execute(
                data.tool_instances[call.name], json.loads(call.arguments), **execute_kwargs
            )
        except Exception as exc:  # noqa: BLE001 - a failing tool is the model's problem to handle, not the run's
            logger.warning("tool %s failed: %r", call.name, exc)
            data.num_tool_errors += 1
            return ToolResponse(text=f"Error when executing tool {call.name}: {exc}")
        data.tool_rewards.append(float(reward or 0.0))
        response = ToolResponse.coerce(response)
        text = truncate_text(
            response.text or "", self.multi_turn.max_tool_response_length, self.multi_turn.tool_response_truncate_side
        )
        return response.model_copy(update={"text": text})

    async def _start_interaction(self, data: AgentData, kwargs: dict[str, Any]) -> None:
        if not self.interaction_map:
            return
        interaction_kwargs = dict(kwargs.get("interaction_kwargs") or {})
        name = interaction_kwargs.get("name")
        if name is None and len(self.interaction_map) == 1:
            name = next(iter(self.interaction_map))
        if name not in self.interaction_map:
            raise ValueError(
                f"interaction_kwargs.name={name!r} is not in the interaction config; "
                f"available: {sorted(self.interaction_map)}"
            )
        data.interaction = self.interaction_map[name]
        data.interaction_kwargs = interaction_kwargs
        await data.interaction.start_interaction(data.request_id, **interaction_kwargs)

    async def _release(self, data: AgentData) -> None:
        for name, instance_id in data.tool_instances.items():
            try:
                await self.tools[name].release(instance_id)
            except Exception as exc:  # noqa: BLE001 - releasing must not lose the trajectory
                logger.warning("releasing tool %s failed: %r", name, exc)
        if data.interaction is not None:
            await data.interaction.finalize_interaction(data.request_id)

    # ------------------------------------------------------------------ output

    def _output(self, data: AgentData) -> AgentLoopOutput:
        mismatch = not self.chat.sanity_check(
            data.messages, data.prompt_ids + data.response_ids, self.multi_turn.tokenization_sanity_check_mode
        )
        if mismatch and not ToolAgentLoop._warned_mismatch:
            ToolAgentLoop._warned_mismatch = True  # counted per trajectory in agent_loop/tokenization_mismatch
            logger.warning(
                "turn-by-turn token ids differ from the whole chat's tokenization (the model sampled a "
                "non-canonical tokenization, or the template renders turns differently); training uses the "
                "sampled ids. Logged once; see agent_loop/tokenization_mismatch/mean"
            )
        log_probs = data.response_logprobs
        return AgentLoopOutput(
            prompt_ids=data.prompt_ids,
            response_ids=data.response_ids[: self.response_length],
            response_mask=data.response_mask[: self.response_length],
            response_logprobs=None if log_probs is None else log_probs[: self.response_length],
            num_turns=1 + data.assistant_turns + data.user_turns,
            metrics=AgentLoopMetrics(**data.metrics),
            extra_fields={
                "turn_scores": list(data.turn_scores),
                "tool_rewards": list(data.tool_rewards),
                "num_tool_calls": data.num_tool_calls,
                "num_tool_errors": data.num_tool_errors,
                "tokenization_mismatch": float(mismatch),
            },
        )
