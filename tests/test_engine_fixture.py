"""The engine answers every recorded call exactly as ``textcraft-synth@1`` did: the always-on exact-output check.

``tests/fixtures/engine-observations.jsonl.gz`` holds the reference environment's answers to about 210,000
tool calls: one episode per task of both splits, its gold crafts interleaved with some 7,000 fuzzed calls,
then a ``finish`` (``scripts/record_engine_fixture.py`` says how they were chosen and recorded, and
describes the file).  The gold calls themselves are not stored: they are rebuilt here from ``data/``.
This test needs nothing but the repository.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Tuple

import pytest

from tcsynth import game, records

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "engine-observations.jsonl.gz"
FORMAT = "tcsynth-engine-fixture/1"
PAIRS_KEY = "__pairs__"
SHOWN_MISMATCHES = 5

# What the answers say, one pattern per message of SPEC §2; every recorded answer must match one.
CRAFT_ANSWERS = [
    ("crafted", r"Successfully crafted \d+ .+\(s\)"),
    ("ingredients not a dict", r"Error: ingredients must be a dict, got \w+"),
    ("target not a pair", r"Error: target must be a tuple of \(item_name, count\)"),
    ("target item not a str", r"Error: target item must be a string, got \w+"),
    ("target count not an int", r"Error: target count must be an int, got \w+"),
    ("target count not positive", r"Error: target count must be positive, got (-?\d+|False)"),
    ("ingredient name not a str", r"Error: ingredient name must be a string, got \w+"),
    ("ingredient count not an int", r"Error: ingredient count for .+ must be an int, got \w+"),
    ("ingredient count not positive", r"Error: ingredient count for .+ must be positive, got (-?\d+|False)"),
    ("no recipe", r"Error: No recipe found for .*"),
    ("all recipes failed", r"Error: All 1 recipe\(s\) failed for .+\. Errors:\nRecipe 1: .+"),
]
# The reasons a recipe fails, as the last line of an "all recipes failed" answer gives them.
RECIPE_PROBLEMS = [
    ("not divisible", r"Target count \d+ is not divisible by recipe result count \d+"),
    ("missing ingredient", r"Missing required ingredient .+"),
    ("wrong amount", r"Wrong amount of .+\. Need \d+, provided (\d+|True)"),
    ("extra ingredients", r"Extra ingredients not required: .*"),  # an extra named "" leaves it empty
    ("insufficient", r"Insufficient ingredients in inventory: .+: need \d+, have \d+"),
]
# The problems that list every offender, joined by ", ".
SEVERAL = ("extra ingredients", "insufficient")
# Fewest answers of each kind a complete fixture has (the recorded one has several times as many).
MINIMUM_PER_KIND = 40


def decode(value: Any) -> Any:
    """The call argument the fixture stored (``{"__pairs__": [[k, v], ...]}`` is a dict with odd keys)."""
    if isinstance(value, dict):
        if list(value) == [PAIRS_KEY]:
            return {decode(key): decode(item) for key, item in value[PAIRS_KEY]}
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item) for item in value]
    return value


@pytest.fixture(scope="module")
def recorded() -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    with gzip.open(FIXTURE, "rt", encoding="ascii") as handle:
        lines = [json.loads(line) for line in handle]
    return lines[0], lines[1:]


@pytest.fixture(scope="module")
def rows(data) -> Dict[str, records.Row]:
    return {row["name"]: row for split in records.SPLITS for row in data.tasks[split]}


class Call:
    """One recorded call: where it sits, what was called, what the reference answered."""

    __slots__ = ("task", "number", "kind", "tool", "arguments", "answer")

    def __init__(self, task, number, kind, tool, arguments, answer):
        self.task, self.number, self.kind = task, number, kind
        self.tool, self.arguments, self.answer = tool, arguments, answer

    def describe(self, got: str) -> str:
        return "%s call %d (%s): %s %s\n  expected %r\n  got      %r" % (
            self.task,
            self.number,
            self.kind,
            self.tool,
            json.dumps(self.arguments, default=repr),
            self.answer,
            got,
        )


def episode_calls(episode: Mapping[str, Any], row: records.Row) -> Iterator[Call]:
    """The episode's calls in order: each stored answer with the call it answers (gold ones from the row)."""
    gold = records.gold_steps(row)
    for number, step in enumerate(episode["steps"], 1):
        if isinstance(step, str):
            item, total, ingredients = next(gold)
            yield Call(row["name"], number, "gold", "craft", {"ingredients": ingredients, "target": [item, total]}, step)
        else:
            tool, arguments, answer, kind = step
            yield Call(row["name"], number, kind, tool, decode(arguments), answer)


def kinds_of(call: Call) -> List[str]:
    """What a recorded answer is, as the names of :data:`CRAFT_ANSWERS` and :data:`RECIPE_PROBLEMS` say."""
    if call.tool != "craft":
        return [call.tool]
    for kind, pattern in CRAFT_ANSWERS:
        if re.fullmatch(pattern, call.answer, re.DOTALL):
            break
    else:
        return ["unclassified"]
    if kind != "all recipes failed":
        return [kind]
    problem = call.answer.split("\n", 1)[1].split(": ", 1)[1]
    for name, pattern in RECIPE_PROBLEMS:
        if re.fullmatch(pattern, problem):
            several = problem.count(": need ") > 1 if name == "insufficient" else ", " in problem
            return [kind, name] + ([name + ", several"] if several and name in SEVERAL else [])
    return [kind, "unclassified"]


def test_the_fixture_is_for_this_repository(recorded, rows, data):
    header, episodes = recorded
    assert header["format"] == FORMAT and header["environment"] == game.ENVIRONMENT
    # Recorded against the same world and tasks as data/ holds (a changed world needs a new recording).
    assert header["sha256"] == records.SOURCE_SHA256
    assert records.sha256_hex(data.recipes_bytes) == records.SOURCE_SHA256[records.RECIPES_FILE]
    # One episode per task, in source order, and the counts the header gives.
    assert [episode["task"] for episode in episodes] == list(rows)
    assert header["episodes"] == len(episodes) == sum(records.TASK_COUNTS.values())
    stored = Counter(isinstance(step, str) for episode in episodes for step in episode["steps"])
    assert (stored[True], stored[False]) == (header["gold_calls"], header["other_calls"])
    # gzip's own header carries no timestamp, so re-recording gives the same bytes.
    assert FIXTURE.read_bytes()[4:8] == b"\0\0\0\0"


def test_the_gold_crafts_of_every_task_are_played(recorded, rows):
    header, episodes = recorded
    cut_short = 0
    for episode in episodes:
        calls = list(episode_calls(episode, rows[episode["task"]]))
        played = sum(call.kind == "gold" for call in calls)
        assert calls[-1].tool == "finish" and all(call.tool != "finish" for call in calls[:-1]), episode["task"]
        if calls[-1].kind == "finish_early":
            cut_short += 1
        else:
            assert played == len(rows[episode["task"]]["gold_trajectory"]), episode["task"]
    assert 0 < cut_short < len(episodes) // 10
    assert header["gold_calls"] > 0.95 * sum(len(row["gold_trajectory"]) for row in rows.values())


def test_the_engine_answers_every_call_as_recorded(recorded, rows, world):
    header, episodes = recorded
    mismatches, wrong_rewards, compared = [], [], 0
    for episode in episodes:
        row = rows[episode["task"]]
        ours = game.Game.for_task(world, records.engine_task(row))
        for call in episode_calls(episode, row):
            got = ours.call(call.tool, call.arguments)
            compared += 1
            if got != call.answer:
                mismatches.append(call.describe(got))
        reward = 1.0 if ours.succeeded() else 0.0
        if reward != episode["reward"]:
            wrong_rewards.append("%s: reward %s, recorded %s" % (episode["task"], reward, episode["reward"]))
    assert compared == header["gold_calls"] + header["other_calls"]
    if mismatches:  # pytest.fail, not assert: the report names calls instead of printing the whole list
        shown = "\n".join(mismatches[:SHOWN_MISMATCHES])
        pytest.fail("%d of %d answers differ from the recording; the first:\n%s" % (len(mismatches), compared, shown))
    if wrong_rewards:
        pytest.fail("%d rewards differ: %s" % (len(wrong_rewards), "; ".join(wrong_rewards[:SHOWN_MISMATCHES])))


def test_the_fixture_covers_every_message_of_the_contract(recorded, rows):
    _, episodes = recorded
    counts: Counter = Counter()
    rewards = Counter(episode["reward"] for episode in episodes)
    for episode in episodes:
        for call in episode_calls(episode, rows[episode["task"]]):
            counts.update(kinds_of(call))
            if call.tool == "get_info":
                asked = call.arguments["items"]
                counts["get_info: " + ("nothing" if not asked else "repeated" if len(set(asked)) < len(asked) else "distinct")] += 1
            if call.tool == "finish" and not call.arguments["message"]:
                counts["finish: empty message"] += 1
    assert counts["unclassified"] == 0, "answers that match no message of SPEC §2"
    expected = [kind for kind, _ in CRAFT_ANSWERS] + [kind for kind, _ in RECIPE_PROBLEMS]
    expected += [name + ", several" for name in SEVERAL] + ["get_info", "view_inventory", "finish"]
    expected += ["get_info: nothing", "get_info: repeated", "finish: empty message"]
    thin = {kind: counts[kind] for kind in expected if counts[kind] < MINIMUM_PER_KIND}
    assert not thin, "too few recorded answers of these kinds: %s" % thin
    assert rewards[1.0] > 0 and rewards[0.0] >= MINIMUM_PER_KIND
