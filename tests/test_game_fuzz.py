"""Property tests (Hypothesis) of the untrusted-input side of ``game.py``: the log reader, the verifier and the
``textcraft`` command's argument parser (issue 9, item 7).

The examples are derandomized and their number fixed, so every run checks the same cases and the module stays
well under a minute; ``benchmarks/fuzz_verifier.py`` runs a longer, randomized search.  The properties:

* any bytes, honest or mutated (bytes flipped, lines cut, swapped, duplicated, renumbered, values nested or
  inflated), are graded without an exception, 0.0 or 1.0;
* 1.0 only when replaying the same calls through :class:`~tcsynth.game.Game` succeeds and the log is byte for
  byte what the command would have written for them;
* an honest log is graded as the replay of its calls grades them;
* the command's parser either refuses words (``BadCommand``) or returns a call whose record the log reader
  takes back unchanged.
"""

from __future__ import annotations

import json
import os
from typing import List, Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import script_modules

from tcsynth import game, records

FUZZ = settings(derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def fuzz(examples: int) -> settings:
    """The fixed budget of one property: ``examples`` derandomized examples."""
    return settings(FUZZ, max_examples=examples)


@pytest.fixture(scope="module")
def rows(data) -> List[Mapping]:
    """The train task with the shortest gold solution of each difficulty."""
    chosen = {}
    for row in data.tasks["train"]:
        best = chosen.get(row["difficulty"])
        if best is None or len(row["gold_trajectory"]) < len(best["gold_trajectory"]):
            chosen[row["difficulty"]] = row
    return [chosen[key] for key in sorted(chosen)]


# ------------------------------------------------------------------------------------------- honest episodes

NAMES = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12) | st.sampled_from(
    ["raw_a1", "a1_i5", "", "[", '"', "\\", "\u0663", "x" * 40]
)
SMALL_INTS = st.integers(min_value=-3, max_value=12) | st.sampled_from([True, False, 10 ** 17])


@st.composite
def calls(draw, row):
    """A list of tool calls on ``row``: a prefix of its gold crafts mixed with random calls, maybe a finish."""
    gold = [{"ingredients": ingredients, "target": [item, total]} for item, total, ingredients in records.gold_steps(row)]
    items = sorted({step["target"][0] for step in gold} | {name for step in gold for name in step["ingredients"]})
    plan = []
    for step in gold[: draw(st.integers(0, len(gold)))]:
        plan.append(("craft", step))
    random_call = st.one_of(
        st.builds(lambda ingredients, item, count: ("craft", {"ingredients": ingredients, "target": [item, count]}),
                  st.dictionaries(st.sampled_from(items) | NAMES, SMALL_INTS, max_size=4), st.sampled_from(items) | NAMES, SMALL_INTS),
        st.builds(lambda names: ("get_info", {"items": names}), st.lists(st.sampled_from(items) | NAMES, max_size=5)),
        st.just(("view_inventory", {})),
    )
    for _ in range(draw(st.integers(0, 4))):
        plan.insert(draw(st.integers(0, len(plan))), draw(random_call))
    if draw(st.booleans()):
        plan.append(("finish", {"message": draw(st.sampled_from(["done", "", "all crafted \u00e9"]) | NAMES)}))
    return plan


# The bytes the command writes for a plan (stopping at finish), as play_command would: the long fuzz run's.
honest_log = script_modules.load("fuzz_verifier", "benchmarks").honest_log


def check_grading(world, row, data: bytes) -> game.Verdict:
    """Grade ``data`` and hold the verdict to the properties in the module docstring."""
    task = records.engine_task(row)
    verdict = game.score_log(world, task, data)
    assert verdict.reward in (0.0, 1.0)
    assert isinstance(verdict.reason, str) and verdict.reason
    if verdict.reward == 1.0:
        logged = [json.loads(line) for line in data.decode("ascii").splitlines()]
        replayed = game.replay(world, task, [{"tool": record["tool"], "args": record["args"]} for record in logged])
        assert replayed.reward == 1.0, replayed.reason
        rebuilt = b"".join(
            game.format_record(number, record["tool"], record["args"], game.craft_succeeded(answer) if record["tool"] == "craft" else None)
            for number, (record, answer) in enumerate(zip(logged, replayed.observations), 1)
        )
        assert rebuilt == data
    return verdict


def test_the_oracle_accepts_each_gold_episode_and_refuses_a_forged_one(world, rows, monkeypatch):
    """The 1.0 branch of check_grading runs on every gold episode, and it fails a log it should not pass."""
    for row in rows:
        plan = [("craft", {"ingredients": i, "target": [item, total]}) for item, total, i in records.gold_steps(row)]
        data = honest_log(world, row, plan + [("finish", {"message": "done"})])
        assert check_grading(world, row, data).reward == 1.0
    forged = data.replace(b'"ok":true', b'"ok":false', 1)
    monkeypatch.setattr(game, "score_log", lambda *args: game.Verdict(1.0, "forced", 0, 0, True, {}, []))
    with pytest.raises(AssertionError):  # a 1.0 given to it does not replay to the same bytes
        check_grading(world, rows[-1], forged)


@fuzz(120)
@given(choice=st.data())
def test_an_honest_log_is_graded_as_its_replay(world, rows, choice):
    row = choice.draw(st.sampled_from(rows))
    plan = choice.draw(calls(row))
    data = honest_log(world, row, plan)
    verdict = check_grading(world, row, data)
    logged = [json.loads(line) for line in data.decode("ascii").splitlines()]
    replayed = game.replay(world, records.engine_task(row), logged)
    assert verdict.as_dict() == replayed.as_dict()


# ------------------------------------------------------------------------------------------------ mutations

INFLATIONS = st.sampled_from([b"[", b"]", b"{", b"}", b'"', b"\\", b"9", b"0", b"-", b" ", b",", b":", b"\\u0000", b"\xff", b"\r"])


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """``data`` after one to three random mutations of the kinds issue 9 lists."""
    for _ in range(draw(st.integers(1, 3))):
        lines = data.splitlines(keepends=True)
        kind = draw(st.sampled_from(["flip", "cut", "swap", "duplicate", "renumber", "nest", "inflate", "truncate", "ok", "append", "splice"]))
        if kind == "flip" and data:
            at = draw(st.integers(0, len(data) - 1))
            data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
        elif kind == "cut" and lines:
            del lines[draw(st.integers(0, len(lines) - 1))]
            data = b"".join(lines)
        elif kind == "swap" and len(lines) > 1:
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            data = b"".join(lines)
        elif kind == "duplicate" and lines:
            at = draw(st.integers(0, len(lines) - 1))
            lines.insert(at, lines[at])
            data = b"".join(lines)
        elif kind == "renumber" and lines:
            at = draw(st.integers(0, len(lines) - 1))
            number = draw(st.integers(-2, len(lines) + 2) | st.sampled_from([10 ** 18, 10 ** 19, 0]))
            data = b"".join(lines[:at]) + lines[at].replace(b'{"seq":%d,' % (at + 1), b'{"seq":%d,' % number, 1) + b"".join(lines[at + 1:])
        elif kind == "nest" and data:
            depth = draw(st.integers(1, 3000))
            at = draw(st.integers(0, len(data) - 1))
            data = data[:at] + b"[" * depth + data[at:at + draw(st.integers(0, 8))] + b"]" * depth + data[at + 8:]
        elif kind == "inflate":
            at = draw(st.integers(0, len(data)))
            data = data[:at] + draw(INFLATIONS) * draw(st.integers(1, 70000)) + data[at:]
        elif kind == "truncate" and data:
            data = data[: draw(st.integers(0, len(data) - 1))]
        elif kind == "ok":
            data = data.replace(b'"ok":true', b'"ok":false', 1) if draw(st.booleans()) else data.replace(b'"ok":false', b'"ok":true', 1)
        elif kind == "append":
            data = data + game.format_record(len(lines) + 1, "view_inventory", {})
        elif kind == "splice" and lines:
            # a line re-encoded another way: spaces, key order or escapes the command never writes
            at = draw(st.integers(0, len(lines) - 1))
            try:
                record = json.loads(lines[at])
            except (ValueError, RecursionError):  # after a "nest" mutation, too deep for json itself
                continue
            style = draw(st.sampled_from([{}, {"ensure_ascii": False}, {"separators": (",", ":"), "sort_keys": True}, {"indent": 0}]))
            lines[at] = json.dumps(record, **style).replace("\n", "").encode("utf-8", "surrogatepass") + b"\n"
            data = b"".join(lines)
    return data


@fuzz(400)
@given(choice=st.data())
def test_a_mutated_log_never_raises_and_scores_one_only_when_honest(world, rows, choice):
    row = choice.draw(st.sampled_from(rows))
    data = choice.draw(mutated(honest_log(world, row, choice.draw(calls(row)))))
    check_grading(world, row, data)


@fuzz(150)
@given(data=st.binary(max_size=400) | st.text(alphabet='{}[]":,0123456789-tfnrue\\ \n', max_size=400).map(str.encode))
def test_arbitrary_bytes_never_raise(world, rows, data):
    check_grading(world, rows[0], data)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory, rows, data):
    """A trusted task.json/recipes.json pair and a root whose log the tests overwrite."""
    from tcsynth import harbor

    directory = tmp_path_factory.mktemp("fuzz-verify")
    (directory / "task.json").write_bytes(harbor.files.task_json_bytes(rows[0], data.world_name, records.sha256_hex(data.recipes_bytes)))
    (directory / "recipes.json").write_bytes(data.recipes_bytes)
    (directory / "root" / "app").mkdir(parents=True)
    return directory


@fuzz(60)
@given(choice=st.data())
def test_the_verifier_writes_a_reward_for_any_log(world, rows, sandbox, choice):
    data = choice.draw(mutated(honest_log(world, rows[0], choice.draw(calls(rows[0])))))
    log = sandbox / "root" / "app" / "actions.jsonl"
    log.write_bytes(data)
    out = sandbox / "out"
    document = game.verify(str(sandbox / "task.json"), str(sandbox / "recipes.json"), str(sandbox / "root"), "app/actions.jsonl", str(out))
    expected = check_grading(world, rows[0], data)
    assert (document["reward"], document["reason"]) == (expected.reward, expected.reason)
    assert (out / game.REWARD_FILE).read_text() == '{"reward": %s}\n' % expected.reward
    assert game._UNEXPECTED not in document["reason"]
    assert sorted(os.listdir(out)) == [game.REWARD_FILE, game.VERDICT_FILE]


# ---------------------------------------------------------------------------------------- the command's words

WORD = st.lists(st.sampled_from(list("0123456789-+_ =.e[]{}\",:xa") + ["\u0663", "\uff17", "\u00b2", "\udcff", "raw_a1"]), max_size=8).map("".join)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10 ** 20), 10 ** 20) | st.floats(allow_nan=False) | NAMES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NAMES, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def command_words(draw):
    command = draw(st.sampled_from(["craft", "info", "get_info", "inventory", "view_inventory", "finish", "dance"]))
    if command in ("craft", "info") and draw(st.booleans()):
        value = draw(JSON_VALUES | st.fixed_dictionaries({"ingredients": JSON_VALUES, "target": JSON_VALUES}))
        text = json.dumps(value)
        if draw(st.booleans()):
            depth = draw(st.integers(1, 5000))
            text = "[" * depth + text + "]" * depth
        return [command, "--json", text]
    return [command] + draw(st.lists(WORD, max_size=5))


@fuzz(500)
@given(words=command_words())
def test_the_parser_refuses_or_returns_a_call_the_log_takes_back(words):
    try:
        tool, arguments = game.read_command(words)
    except game.BadCommand as problem:
        assert str(problem) and "\n" not in str(problem)
        return
    assert game.argument_problem(tool, arguments) is None
    line = game.format_record(1, tool, arguments, False)
    (logged,) = game.read_log(line)
    assert (logged.tool, logged.args) == (tool, arguments)
    assert game.format_record(1, logged.tool, logged.args, logged.ok) == line
