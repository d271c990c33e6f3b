"""Baseline agents behind one signature, and a tool-calling agent for any OpenAI-compatible endpoint.

Every agent follows :class:`Agent`: ``reset`` hands it the first observation of
:class:`tcsynth.env.TextCraftEnv` (system prompt, goal, tool schemas) and ``act`` turns the previous
turn's observation messages into the next :class:`Turn`, whose ``action`` goes to ``env.step`` as it is.

==========  ===============================================================================================
agent       what it does
==========  ===============================================================================================
``oracle``  plays the row's gold crafts (total counts), then ``finish``; the only agent given the row
``nop``     calls ``finish`` at once: the floor, and a check that reward is never free
``random``  well-formed calls with random content (seeded): looks items up, crafts a random known recipe
            at a random multiple, sometimes finishes
``planner`` reads only what the tools print: ``view_inventory``, then ``get_info`` level by level down the
            recipe tree, then crafts each needed item once with the total the tree calls for, then finishes
``openai``  a chat model behind ``/chat/completions`` with tool calling, prompted by :mod:`tcsynth.prompts`
==========  ===============================================================================================

``recursive-planner`` is the planner that hands deep subtrees to subagents (``launch_subagent``, see
:mod:`tcsynth.recursive`); the runner plays its subagents (:mod:`tcsynth.recursive_env`).

``calls_per_turn`` (oracle, planner) sets how many tool calls one turn may carry; ``None`` puts every call
the agent has ready into one turn.  :func:`make_agent` builds an agent by name.  Each agent declares its
settings in ``OPTIONS`` (:class:`Option`): the command line makes its flags from them, so adding an agent
never means editing the runner.
"""

from typing import Any, Callable, Dict

# The package: base (the signature and shared pieces), baselines, chat (the openai agent),
# recursive_planner; every public name is importable from tcsynth.agents.

from .base import Agent, AgentError, Message, Option, ToolCall, Turn, call, goal_targets, in_turns, positive_int, positive_number
from .baselines import CALLS_PER_TURN, NopAgent, OracleAgent, PlannerAgent, RandomAgent, ScriptedAgent
from .chat import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_BASE_URL,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    MAX_RETRY_AFTER_S,
    OpenAIAgent,
    RateLimiter,
    requests_in_flight,
    retry_after_seconds,
    shared_limiter,
)
from .recursive_planner import DEFAULT_DELEGATE_DEPTH, DEFAULT_MAX_DELEGATION_DEPTH, RecursivePlannerAgent

# ------------------------------------------------------------------------------------------------ registry

AGENTS: Dict[str, Callable[..., Agent]] = {
    "oracle": OracleAgent,
    "nop": NopAgent,
    "random": RandomAgent,
    "planner": PlannerAgent,
    "openai": OpenAIAgent,
    "recursive-planner": RecursivePlannerAgent,
}


def make_agent(name: str, **options: Any) -> Agent:
    """The agent called ``name`` built with ``options`` (``ValueError`` naming the agents otherwise)."""
    if name not in AGENTS:
        raise ValueError("unknown agent %r; the agents are %s" % (name, ", ".join(AGENTS)))
    try:
        return AGENTS[name](**options)
    except TypeError as error:
        raise ValueError("agent %s: %s" % (name, error))


__all__ = [
    "AGENTS", "CALLS_PER_TURN", "DEFAULT_API_KEY_ENV", "DEFAULT_BASE_URL", "DEFAULT_DELEGATE_DEPTH",
    "DEFAULT_MAX_DELEGATION_DEPTH", "DEFAULT_RETRIES", "DEFAULT_TIMEOUT_S", "MAX_RETRY_AFTER_S", "Agent",
    "AgentError", "Message", "NopAgent", "OpenAIAgent", "Option", "OracleAgent", "PlannerAgent", "RandomAgent",
    "RateLimiter", "RecursivePlannerAgent", "ScriptedAgent", "ToolCall", "Turn", "call", "goal_targets",
    "in_turns", "make_agent", "positive_int", "positive_number", "requests_in_flight", "retry_after_seconds",
    "shared_limiter",
]
