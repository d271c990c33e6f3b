"""The loop that plays an agent on an environment to the end of its episode, for every runner.

``eval`` (:func:`tcsynth.evaluate.run_episode`) plays each task's agent with it, and the recursive runner
(:mod:`tcsynth.recursive_env`) each subagent, so both see the same turns, notes and aborts.
"""

from __future__ import annotations

import random
from typing import Any, Dict, List, Mapping, Optional

from .agents import AgentError
from .env import TextCraftEnv


def play(env: TextCraftEnv, agent, rng: random.Random, row: Optional[Mapping[str, Any]] = None, record_turns: bool = False) -> Dict[str, Any]:
    """Play one agent's episode on ``env`` to its end.

    Returns ``reward``, ``terminated``, ``truncated``, ``aborted`` (why the agent stopped early, or None),
    ``notes`` (the agent's, each as ``turn N: ...``) and ``turns`` (each turn's action, observations and
    notes; empty unless ``record_turns``).  ``row`` goes to the agent's ``reset`` (privileged agents only).
    """
    observation, info = env.reset()
    agent.reset(observation, info, rng=rng, row=row)
    observations: List[Dict[str, Any]] = []
    turns: List[Dict[str, Any]] = []
    notes: List[str] = []
    reward, terminated, truncated, aborted = 0.0, False, False, None
    while not (terminated or truncated):
        try:
            turn = agent.act(observations)
        except AgentError as error:
            aborted = str(error)
            break
        observations, reward, terminated, truncated, info = env.step(turn.action)
        if record_turns:
            turns.append({"action": turn.action, "observations": [m["content"] for m in observations], "notes": list(turn.notes)})
        notes.extend("turn %d: %s" % (env.steps, note) for note in turn.notes)
    return {"reward": reward, "terminated": terminated, "truncated": truncated, "aborted": aborted, "notes": notes, "turns": turns}
