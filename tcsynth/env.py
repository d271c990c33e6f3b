"""``TextCraftEnv``: one TextCraft-Synth task as a Gymnasium-style environment for text agents.

Description
    The agent plays one task row (from any task config of the dataset) through the engine,
    :class:`tcsynth.game.Game`: this module only wires chat messages to the engine's tools and counts turns.

Action
    One assistant turn, holding one or more tool calls.  Accepted shapes:

    * a list of tool calls, each in a form :func:`tcsynth.game.parse_tool_call` reads
      (``{"name", "arguments"}``, OpenAI's ``{"id", "type", "function": {...}}``, ``{"tool", "args"}``);
    * one such call on its own;
    * an assistant chat message ``{"role": "assistant", "content", "tool_calls"}``; when it has no
      ``tool_calls``, the calls written in its text are read, in any chat-template family's format
      (Hermes ``<tool_call>{json}</tool_call>``, Qwen3.6 XML, Llama 3 JSON, GLM-4, gpt-oss, ...: see
      :mod:`tcsynth.toolcalls`);
    * a string, read the same way.

Observation
    :meth:`TextCraftEnv.reset` returns ``{"messages": [system, user], "tools": [...]}``: the system prompt, the
    goal as the first user message and the four tools' JSON schemas, all from :mod:`tcsynth.prompts`.
    :meth:`TextCraftEnv.step` returns a list of chat messages: one ``{"role": "tool", "name", "content"}`` per
    call (with ``tool_call_id`` when the call had an ``id``), or a single ``{"role": "user", "content":
    "Error: ..."}`` when the turn held no tool call.  They can be appended to a chat as they are.

Rewards
    1.0 on the step whose ``finish`` completes the goal (the engine's success rule), else 0.0.

Episode end
    ``terminated`` when ``finish`` has been called; ``truncated`` when the turn budget (default: the row's
    ``max_steps``, 75) is spent first.  A bad action (unknown tool, arguments that are not JSON, a turn
    without a tool call) gets an ``Error:`` observation and uses its step; it never raises.  Calls after
    ``finish`` in the same turn get the engine's "episode is over" answer and change nothing.

Information
    ``info`` holds ``steps`` (turns used), ``max_steps``, ``tool_calls``, ``crafts`` (accepted),
    ``crafted`` (items crafted, in order, each once), ``problems`` (one line per bad action) and
    ``verdict`` (:meth:`tcsynth.game.Verdict.as_dict`).

>>> from textcraft_synth import load_world
>>> from tcsynth.env import TextCraftEnv
>>> env = TextCraftEnv(row, world=load_world())     # row: a task row, e.g. load_dataset(...)["val"][0]
>>> observation, info = env.reset()
>>> messages, reward, terminated, truncated, info = env.step([{"name": "view_inventory", "arguments": {}}])
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from . import game, prompts, records
from .toolcalls import hermes_tool_calls, message_tool_calls, text_tool_calls  # noqa: F401 - public here too

Action = Union[str, Mapping[str, Any], List[Any]]
Message = Dict[str, Any]
# The turn budget that never runs out.  One scheme everywhere (env, eval, the command line, summary.json):
# ``max_steps`` is a positive int, NO_LIMIT (0) for no budget, or None for the row's own ``max_steps``.
NO_LIMIT = 0
NO_TOOL_CALL = "Error: the turn holds no tool call; call one of the tools (%s)" % ", ".join(game.TOOL_PARAMETERS)


def _read_text(text: str) -> List[Any]:
    # Every chat-template family's way of writing calls (see tcsynth.toolcalls), typed by our tool schemas.
    return text_tool_calls(text, tools=prompts.TOOLS)


def action_tool_calls(action: Any) -> List[Any]:
    """The tool calls of one action in any accepted shape (see the module docstring)."""
    if isinstance(action, str):
        return _read_text(action)
    if isinstance(action, Mapping):
        if "role" in action or "tool_calls" in action or ("content" in action and "name" not in action):
            return message_tool_calls(action, _read_text)
        return [action]
    if isinstance(action, (list, tuple)):
        return list(action)
    return []


def validate_max_steps(max_steps: Any) -> int:
    """A turn budget: a positive int, or :data:`NO_LIMIT` (0)."""
    if type(max_steps) is not int or max_steps < 0:
        raise ValueError("max_steps must be a positive integer or NO_LIMIT (0), got %r" % (max_steps,))
    return max_steps


class TextCraftEnv:
    """One task row played through the engine, a turn at a time.

    Args:
        row (`dict`): a task row of the dataset (``goal``, ``target_items``, ``initial_inventory`` and
            ``max_steps`` are read; ``name`` when present).
        world (`tcsynth.game.World`): the recipes; ``textcraft_synth.load_world()`` reads ``data/``.
        max_steps (`int`, *optional*): the turn budget; :data:`NO_LIMIT` (0) for none; ``None`` (the default)
            for the row's ``max_steps``.
    """

    def __init__(self, row: Mapping[str, Any], world: game.World, max_steps: Optional[int] = None):
        self.row = row
        self.world = world
        self.task = records.engine_task(row)
        self.max_steps = validate_max_steps(row.get("max_steps") if max_steps is None else max_steps)
        self.name = row.get("name", "")
        self._game: Optional[game.Game] = None

    # Gymnasium's API -----------------------------------------------------------------------------------

    def reset(self, *, seed: Optional[int] = None, options: Optional[Mapping[str, Any]] = None) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """Start the episode over.  The game has no randomness: ``seed`` and ``options`` are accepted and unused."""
        self._game = game.Game.for_task(self.world, self.task)
        self.steps = 0
        self.tool_calls = 0
        self.crafted: List[str] = []
        self.problems: List[str] = []
        self._observations: List[str] = []
        observation = {
            "messages": [
                {"role": "system", "content": prompts.SYSTEM_PROMPT},
                {"role": "user", "content": prompts.user_prompt(self.task["goal"])},
            ],
            "tools": prompts.tool_schemas(),
        }
        return observation, self.info()

    def step(self, action: Action) -> Tuple[List[Message], float, bool, bool, Dict[str, Any]]:
        """Play one turn; returns ``(observations, reward, terminated, truncated, info)``."""
        if self._game is None:
            raise RuntimeError("call reset() before step()")
        if self.terminated or self.truncated:
            raise RuntimeError("the episode is over (terminated or truncated); call reset()")
        self.steps += 1
        calls = action_tool_calls(action)
        if calls:
            messages = [self._run_call(call) for call in calls]
        else:
            self.problems.append("turn %d: no tool call" % self.steps)
            messages = [{"role": "user", "content": NO_TOOL_CALL}]
        reward = 1.0 if self.terminated and self._game.succeeded() else 0.0
        return messages, reward, self.terminated, self.truncated, self.info()

    # State -----------------------------------------------------------------------------------------------

    @property
    def terminated(self) -> bool:
        """``finish`` has been called (the rules ended the episode)."""
        return self._game is not None and self._game.finished

    @property
    def truncated(self) -> bool:
        """The turn budget is spent and ``finish`` was not called."""
        return not self.terminated and self.max_steps != NO_LIMIT and self.steps >= self.max_steps

    @property
    def game(self) -> game.Game:
        """The engine's episode (inventory, crafts), for inspection."""
        if self._game is None:
            raise RuntimeError("call reset() first")
        return self._game

    def verdict(self) -> game.Verdict:
        """The engine's verdict on the episode as it stands."""
        return game.judge(self.game, self.tool_calls, list(self._observations))

    def info(self) -> Dict[str, Any]:
        """The ``info`` dict of the episode as it stands."""
        return {
            "steps": self.steps,
            "max_steps": self.max_steps,
            "tool_calls": self.tool_calls,
            "crafts": self.game.crafts,
            "crafted": list(self.crafted),
            "problems": list(self.problems),
            "verdict": game.judge(self._game, self.tool_calls, []).as_dict(),
        }

    # Internals ---------------------------------------------------------------------------------------------

    def _run_call(self, call: Any) -> Message:
        self.tool_calls += 1
        call_id = call.get("id") if isinstance(call, dict) and isinstance(call.get("id"), str) else None
        problem = None
        try:
            tool, arguments = game.parse_tool_call(call)
        except game.ToolCallError as error:
            tool, problem = _call_name(call), str(error)
            text = "Error: " + problem
        else:
            crafts_before = self._game.crafts
            text = self._game.call(tool, arguments)
            if self._game.crafts > crafts_before:
                item = arguments["target"][0]
                if item not in self.crafted:
                    self.crafted.append(item)
            elif text == game.EPISODE_OVER:
                problem = "called after finish"
            elif text.startswith("Error: "):
                # A refused craft is play; a call the tools cannot take (unknown tool, wrong arguments) is not.
                problem = game.argument_problem(tool, arguments)
        if problem is not None:
            self.problems.append("turn %d, call %d (%s): %s" % (self.steps, self.tool_calls, tool or "?", problem))
        self._observations.append(text)
        message: Message = {"role": "tool", "name": tool or "", "content": text}
        if call_id is not None:
            message["tool_call_id"] = call_id
        return message


def _call_name(call: Any) -> Optional[str]:
    """The tool name of a call that did not parse, when one can be read."""
    if isinstance(call, dict):
        body = call.get("function", call)
        if isinstance(body, dict) and isinstance(body.get("name", body.get("tool")), str):
            return body.get("name", body.get("tool"))
    return None

