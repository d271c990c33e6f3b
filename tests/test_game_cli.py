"""The in-container ``textcraft`` command: the game file run as ``python3 -I textcraft_game.py COMMAND``.

Expected texts come from SPEC §2 (tool output) and §3 (the action log); exit codes from the issue.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Mapping, Optional

import pytest

from tcsynth import game, harbor, records

GAME_SOURCE = Path(game.__file__)
SUPPORTED = [(3, minor) for minor in range(8, 14)]  # the container's Python may be any of these


def first_row(data, split: str = "train") -> Mapping:
    return data.tasks[split][0]


def make_game_dir(directory: Path, row: Mapping, recipes: bytes) -> Path:
    """A game directory as the container has it: the game file, recipes.json and task.json."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "textcraft_game.py").write_bytes(GAME_SOURCE.read_bytes())
    (directory / "recipes.json").write_bytes(recipes)
    (directory / "task.json").write_bytes(harbor.files.task_json_bytes(row, records.TASK_NAME_PREFIX, records.sha256_hex(recipes)))
    return directory


def textcraft(game_dir: Path, *words: str, python: str = sys.executable, env_dir: Optional[Path] = None):
    env = dict(os.environ, TEXTCRAFT_DIR=str(env_dir or game_dir))
    return subprocess.run(
        [python, "-I", str(game_dir / "textcraft_game.py"), *words], capture_output=True, text=True, env=env, timeout=60
    )


def log_lines(game_dir: Path) -> List[str]:
    path = game_dir / "actions.jsonl"
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture()
def row(data):
    return first_row(data)


@pytest.fixture()
def game_dir(tmp_path, row, data) -> Path:
    return make_game_dir(tmp_path / "textcraft", row, data.recipes_bytes)


def first_gold(row):
    item, total, ingredients = next(records.gold_steps(row))
    return item, total, ingredients


def test_help_exits_zero_and_names_every_command(game_dir):
    result = textcraft(game_dir, "--help")
    assert result.returncode == 0
    for command in ("craft", "info", "inventory", "finish", "--json"):
        assert command in result.stdout
    assert not log_lines(game_dir)


def test_accepted_craft_prints_and_logs_one_compact_record(game_dir, row):
    item, total, ingredients = first_gold(row)
    result = textcraft(game_dir, "craft", item, str(total), *("%s=%d" % kv for kv in ingredients.items()))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Successfully crafted %d %s(s)\n" % (total, item)
    expected = {"seq": 1, "tool": "craft", "args": {"ingredients": ingredients, "target": [item, total]}, "ok": True}
    assert log_lines(game_dir) == [json.dumps(expected, separators=(",", ":"))]


def test_rejected_craft_exits_1_and_is_logged_not_ok(game_dir, row):
    item, total, ingredients = first_gold(row)
    result_count = game.World.from_file(game_dir / "recipes.json").recipes[item][0][0]
    if result_count == 1:
        pytest.fail("the first gold craft of the first task should have result_count > 1")
    bad = total + 1 if (total + 1) % result_count else total + 2
    result = textcraft(game_dir, "craft", item, str(bad), *("%s=%d" % kv for kv in ingredients.items()))
    assert result.returncode == 1
    assert result.stdout.startswith("Error: All 1 recipe(s) failed for %s. Errors:\n" % item)
    assert "Recipe 1: Target count %d is not divisible by recipe result count %d" % (bad, result_count) in result.stdout
    assert json.loads(log_lines(game_dir)[0])["ok"] is False


def test_zero_count_is_the_games_error_not_a_usage_error(game_dir, row):
    item, _, ingredients = first_gold(row)
    result = textcraft(game_dir, "craft", item, "0", *("%s=%d" % kv for kv in ingredients.items()))
    assert (result.returncode, result.stdout) == (1, "Error: target count must be positive, got 0\n")
    assert len(log_lines(game_dir)) == 1


def test_json_forms_log_the_same_arguments(game_dir, row):
    item, total, ingredients = first_gold(row)
    arguments = {"ingredients": ingredients, "target": [item, total]}
    assert textcraft(game_dir, "craft", "--json", json.dumps(arguments)).returncode == 0
    assert textcraft(game_dir, "info", "--json", json.dumps([item])).returncode == 0
    tools = [json.loads(line) for line in log_lines(game_dir)]
    assert tools[0]["args"] == arguments
    assert tools[1] == {"seq": 2, "tool": "get_info", "args": {"items": [item]}}


def test_info_and_inventory_print_the_spec_json(game_dir, row, data):
    item, total, ingredients = first_gold(row)
    inventory = records.list_to_counts(row["initial_inventory"])
    result = textcraft(game_dir, "inventory")
    assert (result.returncode, result.stdout) == (0, json.dumps(inventory) + "\n")
    result = textcraft(game_dir, "info", item, "no_such_item")
    described = json.loads(result.stdout)
    recipes = data.world_document["recipes"][item]
    assert described[0] == {
        "item": item,
        "can_craft": True,
        "is_base": False,
        "in_inventory": 0,
        "crafting_depth": data.world_document["depths"][item],
        "recipes": [{"ingredients": dict(r["ingredients"]), "result_count": r["result_count"]} for r in recipes],
    }
    assert list(described[0]) == ["item", "can_craft", "is_base", "in_inventory", "crafting_depth", "recipes"]
    assert described[1] == {"item": "no_such_item", "can_craft": False, "is_base": False, "in_inventory": 0, "crafting_depth": 0, "recipes": []}
    aliases = textcraft(game_dir, "get_info", item), textcraft(game_dir, "view_inventory")
    assert [r.returncode for r in aliases] == [0, 0]
    assert [json.loads(line)["tool"] for line in log_lines(game_dir)] == ["view_inventory", "get_info", "get_info", "view_inventory"]


def test_finish_ends_the_episode(game_dir):
    result = textcraft(game_dir, "finish", "all", "done")
    assert (result.returncode, result.stdout) == (0, "all done\n")
    for words in (("inventory",), ("finish", "again"), ("info", "raw_a1")):
        after = textcraft(game_dir, *words)
        assert after.returncode == 1
        assert after.stdout.startswith("Error:")
    assert log_lines(game_dir) == ['{"seq":1,"tool":"finish","args":{"message":"all done"}}']


USAGE_ERRORS = [
    (),  # no command
    ("dance",),  # unknown command
    ("craft",),  # no target
    ("craft", "a9_i1"),  # no count
    ("craft", "a9_i1", "three", "raw_a1=2"),  # count not a number
    ("craft", "a9_i1", "3", "raw_a1"),  # ingredient without =N
    ("craft", "a9_i1", "3", "raw_a1=two"),  # amount not a number
    ("craft", "a9_i1", "3", "=2"),  # no ingredient name
    ("craft", "a9_i1", "3", "raw_a1=1", "raw_a1=1"),  # ingredient twice
    ("craft", "--json"),  # no JSON
    ("craft", "--json", "{"),  # not JSON
    ("craft", "--json", "[]"),  # not an object
    ("craft", "--json", '{"ingredients": {}, "target": ["a", 3], "extra": 1}'),  # extra key
    ("craft", "--json", '{"ingredients": {"raw_a1": 2, "raw_a1": 2}, "target": ["a9_i1", 3]}'),  # duplicate key
    ("craft", "--json", '{"ingredients": {"raw_a1": NaN}, "target": ["a9_i1", 3]}'),  # NaN
    ("craft", "--json", '{"ingredients": {}, "target": ["a9_i1", Infinity]}'),  # Infinity
    ("craft", "--json", '{"ingredients": {}, "target": ["a9_i1", 1e400]}'),  # infinite by overflow
    ("info", "--json", '{"a": 1}'),  # not a list
    ("info", "--json", "[1]"),  # not names
    ("info", "--json", '["a"]', "extra"),  # two arguments
    ("inventory", "now"),  # inventory takes nothing
    ("finish",),  # no message
    # Numbers are ASCII digits with an optional leading minus, as the log writes them (issue 9).
    ("craft", "a9_i1", " 3", "raw_a1=2"),  # padded
    ("craft", "a9_i1", "+3", "raw_a1=2"),  # plus sign
    ("craft", "a9_i1", "\u0663", "raw_a1=2"),  # Arabic-Indic three
    ("craft", "a9_i1", "3", "raw_a1=2_0"),  # digit separator (int() reads 20)
    ("craft", "a9_i1", "03", "raw_a1=2"),  # leading zero
    ("craft", "a9_i1", "-0", "raw_a1=2"),  # minus zero
    ("craft", "a9_i1", "3", "raw_a1=" + "9" * 19),  # more digits than the log takes
    ("craft", "a9_i1", "9" * 5000, "raw_a1=2"),  # more digits than Python 3.11+ reads
    # Input past the log's caps is refused before it is decoded or run.
    ("craft", "--json", "[" * 5000 + "]" * 5000),  # a RecursionError on 3.12 before issue 9
    ("craft", "--json", '{"ingredients": {}, "target": ["a9_i1", ' + "[" * 1100 + "]" * 1100 + "]}"),
    ("info", "--json", "[" * 100000),  # longer than a record may be
    ("info", "--json", json.dumps(["a"] * 20000)),  # its record would pass 64 KiB
    ("finish", "m" * (game.LINE_LIMIT + 1)),  # likewise
]


@pytest.mark.parametrize("words", USAGE_ERRORS, ids=[" ".join(w)[:60] or "<none>" for w in USAGE_ERRORS])
def test_usage_errors_exit_2_and_log_nothing(game_dir, words):
    result = textcraft(game_dir, *words)
    assert result.returncode == 2, (words, result.stdout, result.stderr)
    assert result.stderr.startswith("textcraft: ") and "Traceback" not in result.stderr
    assert not log_lines(game_dir)


def test_missing_task_is_unplayable(game_dir):
    (game_dir / "task.json").unlink()
    result = textcraft(game_dir, "inventory")
    assert result.returncode == 3 and "textcraft:" in result.stderr


def test_broken_log_is_unplayable_and_left_alone(game_dir):
    (game_dir / "actions.jsonl").write_text('{"seq":1,"tool":"view_inventory","args":{},"ok":true}\n')
    result = textcraft(game_dir, "inventory")
    assert result.returncode == 3
    assert log_lines(game_dir) == ['{"seq":1,"tool":"view_inventory","args":{},"ok":true}']


@pytest.mark.parametrize("line", [
    b'{"seq":1,"tool":"craft","args":{"ingredients":{},"target":["x",' + b"[" * 5000 + b"]" * 5000 + b']},"ok":false}\n',
    b'{"seq":1,"tool":"get_info","args":{"items":[' + b",".join([b'"a"'] * 30000) + b"]}}\n",
], ids=["5,000 deep", "longer than a record may be"])
def test_a_log_line_past_the_caps_is_unplayable_not_a_traceback(game_dir, line):
    (game_dir / "actions.jsonl").write_bytes(line)
    result = textcraft(game_dir, "inventory")
    assert result.returncode == 3 and "cannot be replayed" in result.stderr and "Traceback" not in result.stderr
    assert (game_dir / "actions.jsonl").read_bytes() == line


def test_recipes_that_do_not_match_the_task_are_unplayable(game_dir):
    recipes = game_dir / "recipes.json"
    recipes.write_bytes(recipes.read_bytes() + b" ")
    result = textcraft(game_dir, "inventory")
    assert result.returncode == 3 and "task.json names" in result.stderr
    assert not log_lines(game_dir)


NUMBER_WORDS = ["0", "7", "-7", "10", "999999999999999999", "-999999999999999999", "1000000000000000000", "00", "07",
                "-0", "-07", "+7", " 7", "7 ", "7\n", "\u0667", "\uff17", "7_0", "7.0", "7e0", "0x7", "", "-", "--7", "\u00b2"]


@pytest.mark.parametrize("word", NUMBER_WORDS, ids=[repr(w) for w in NUMBER_WORDS])
def test_the_command_and_the_log_reader_accept_the_same_numbers(word):
    """The log reader takes a count written ``word`` exactly when the command can write it so, as COUNT or in
    ``craft --json`` (issue 9, item 5); COUNT itself takes only ASCII digits with an optional leading minus."""
    line = '{"seq":1,"tool":"craft","args":{"ingredients":{},"target":["x",%s]},"ok":false}\n' % word
    try:
        game.read_log(line.encode("utf-8"))
        by_log = True
    except game.LogFault:
        by_log = False
    written = set()
    for words in (["craft", "x", word], ["craft", "--json", '{"ingredients": {}, "target": ["x", %s]}' % word]):
        try:
            tool, arguments = game.read_command(words)
        except game.BadCommand:
            continue
        written.add(json.dumps(arguments["target"][1]))
    assert by_log == (word in written), (word, written)
    try:
        game.read_command(["craft", "x", word])
        as_count = True
    except game.BadCommand:
        as_count = False
    assert as_count == (re.fullmatch(r"-?(0|[1-9][0-9]{0,17})", word) is not None and word != "-0")


def test_log_that_is_a_link_is_unplayable(game_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text("")
    (game_dir / "actions.jsonl").symlink_to(elsewhere)
    assert textcraft(game_dir, "inventory").returncode == 3
    assert elsewhere.read_text() == ""


def test_default_directory_is_the_game_files_own(game_dir):
    env = {key: value for key, value in os.environ.items() if key != game.GAME_DIR_VARIABLE}
    result = subprocess.run(
        [sys.executable, "-I", str(game_dir / "textcraft_game.py"), "inventory"], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0
    assert len(log_lines(game_dir)) == 1


CONCURRENT_WORKER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("textcraft_game", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
worker, count, craft = sys.argv[2], int(sys.argv[3]), sys.argv[4:]
for number in range(count):
    words = craft if number % 5 == 0 else ["info", "marker-%s-%d" % (worker, number)]
    status = module.main(words)
    assert status in (0, 1), status
"""


def test_concurrent_commands_keep_the_log_whole(game_dir, row, world):
    """8 processes x 50 commands on one directory: the log replays and holds every command once."""
    item, total, ingredients = first_gold(row)
    craft = ["craft", item, str(total)] + ["%s=%d" % kv for kv in ingredients.items()]
    env = dict(os.environ, TEXTCRAFT_DIR=str(game_dir))
    workers = [
        subprocess.Popen(
            [sys.executable, "-I", "-c", CONCURRENT_WORKER, str(game_dir / "textcraft_game.py"), str(n), "50", *craft],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        for n in range(8)
    ]
    assert [worker.wait(timeout=300) for worker in workers] == [0] * 8
    data = (game_dir / "actions.jsonl").read_bytes()
    parsed = game.read_log(data)  # raises on a torn or misnumbered record
    assert len(parsed) == 400
    markers = [arguments["items"][0] for tool, arguments, _ in parsed if tool == "get_info"]
    assert sorted(markers) == sorted("marker-%d-%d" % (w, n) for w in range(8) for n in range(50) if n % 5)
    crafts = [ok for tool, _, ok in parsed if tool == "craft"]
    assert len(crafts) == 80
    verdict = game.score_log(world, json.loads((game_dir / "task.json").read_text()), data)
    assert "invalid action log" not in verdict.reason  # every ok flag is what the rules give
    assert verdict.crafts == crafts.count(True) > 0


def discover_interpreters() -> Dict[tuple, str]:
    """Every Python 3.8-3.13 on PATH (python3.X) or under pyenv, one per version: ``{(3, X): path}``."""
    candidates = [sys.executable]
    candidates += [shutil.which("python3.%d" % minor) for _, minor in SUPPORTED]
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates += sorted(glob.glob(os.path.join(pyenv, "versions", "3.*", "bin", "python3")))
    found: Dict[tuple, str] = {}
    for candidate in filter(None, candidates):
        try:
            shown = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
                                   capture_output=True, text=True, timeout=30).stdout.split()
        except OSError:
            continue
        version = tuple(map(int, shown)) if len(shown) == 2 else None
        if version in SUPPORTED and version not in found:
            found[version] = candidate
    return dict(sorted(found.items()))


@pytest.fixture(scope="module")
def interpreters() -> Dict[tuple, str]:
    found = discover_interpreters()
    if not found:
        pytest.fail("no Python 3.8-3.13 found on PATH or under pyenv: the game file's portability is untested")
    return found


# Run by each interpreter on the game file: hostile logs through score_log and verify, hostile words through
# read_command.  It prints what it saw; every interpreter must see the same.
SMOKE = r"""
import importlib.util, json, os, random, sys, tempfile
spec = importlib.util.spec_from_file_location("textcraft_game", sys.argv[1])
g = importlib.util.module_from_spec(spec)
spec.loader.exec_module(g)
game_dir = os.path.dirname(sys.argv[1])
world, task = g._world_and_task(os.path.join(game_dir, "recipes.json"), os.path.join(game_dir, "task.json"))
gold = open(sys.argv[2], "rb").read()
def deep(n, opener=b"[", closer=b"]"):
    return b'{"seq":1,"tool":"craft","args":{"ingredients":{},"target":["x",' + opener * n + closer * n + b']},"ok":false}\n'
logs = {
    "gold": gold,
    "1050 deep, as 3.12 writes it": deep(1050),
    "5000 deep": deep(5000),
    "100000 deep, unclosed": deep(100000)[:100100] + b"\n",
    "deep objects": b'{"seq":1,"tool":"finish","args":{"message":"m","x":' + b'{"a":' * 3000 + b'1' + b'}' * 3000 + b'}}\n',
    "escaped quotes hiding brackets": b'{"seq":1,"tool":"get_info","args":{"items":["\\"' + b"[" * 3000 + b'"]}}\n',
    "5000-digit count": b'{"seq":1,"tool":"craft","args":{"ingredients":{},"target":["x",' + b"9" * 5000 + b']},"ok":false}\n',
    "huge float": b'{"seq":1,"tool":"craft","args":{"ingredients":{},"target":["x",1e999]},"ok":false}\n',
}
rng = random.Random(9)
lines = gold.splitlines(True)
for n in range(60):
    data = bytearray(gold)
    kind = n % 4
    if kind == 0:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == 1:
        cut = list(lines)
        del cut[rng.randrange(len(cut))]
        data = bytearray(b"".join(cut))
    elif kind == 2:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        swapped = list(lines)
        swapped[i], swapped[j] = swapped[j], swapped[i]
        data = bytearray(b"".join(swapped))
    else:
        at = rng.randrange(len(data))
        data[at:at] = rng.choice([b"[", b"{", b'"', b"\\", b"-", b"0", b" "]) * rng.randint(1, 3000)
    logs["mutant %d" % n] = bytes(data)
seen = {}
for name, data in logs.items():
    verdict = g.score_log(world, task, data)
    seen[name] = [verdict.reward, verdict.reason, verdict.calls]
out = tempfile.mkdtemp()
root = tempfile.mkdtemp()
os.makedirs(os.path.join(root, "app"))
with open(os.path.join(root, "app", "actions.jsonl"), "wb") as stream:
    stream.write(deep(1050))
document = g.verify(os.path.join(game_dir, "task.json"), os.path.join(game_dir, "recipes.json"), root, "app/actions.jsonl", out)
seen["verify 1050 deep"] = [document["reward"], document["reason"], sorted(os.listdir(out))]
words = [["craft", "--json", "[" * 5000 + "]" * 5000], ["info", "--json", "[" * 100000], ["craft", "x", "9" * 5000],
         ["craft", "x", "\u0662"], ["craft", "x", "2_0"], ["craft", "x", " 2"], ["craft", "x", "+2"], ["craft", "x", "-0"],
         ["craft", "x", "02"], ["craft", "x", "2", "a=" + "1" * 19], ["finish", "m" * 70000], ["craft", "x", "-7", "a=3"]]
for number, command in enumerate(words):
    try:
        seen["words %d" % number] = ["ok", g.read_command(command)]
    except g.BadCommand as problem:
        seen["words %d" % number] = ["bad", str(problem)]
print(json.dumps(seen, sort_keys=True))
"""


def test_game_file_runs_alike_on_every_python_from_38(game_dir, row, interpreters, tmp_path):
    """Syntax for 3.8, and on each interpreter found: a craft, the help, and the hostile-input smoke cases,
    with the same verdicts everywhere (no RecursionError on 3.8-3.13; digits read the same on 3.8 and 3.11+)."""
    ast.parse(GAME_SOURCE.read_text(), feature_version=(3, 8))
    gold = tmp_path / "gold.jsonl"
    steps = list(records.gold_steps(row))
    gold.write_bytes(b"".join(
        game.format_record(n, "craft", {"ingredients": ingredients, "target": [item, total]}, True)
        for n, (item, total, ingredients) in enumerate(steps, 1)
    ) + game.format_record(len(steps) + 1, "finish", {"message": "done"}))
    summaries = {}
    for version, python in interpreters.items():
        smoke = subprocess.run([python, "-I", "-c", SMOKE, str(game_dir / "textcraft_game.py"), str(gold)],
                               capture_output=True, text=True, timeout=300)
        assert smoke.returncode == 0 and not smoke.stderr, (version, smoke.stderr)
        summaries[version] = json.loads(smoke.stdout)
        item, total, ingredients = first_gold(row)
        result = textcraft(game_dir, "craft", item, str(total), *("%s=%d" % kv for kv in ingredients.items()), python=python)
        assert (result.returncode, result.stdout) == (0, "Successfully crafted %d %s(s)\n" % (total, item)), (version, result.stderr)
        assert textcraft(game_dir, "--help", python=python).returncode == 0
        (game_dir / "actions.jsonl").unlink()
    first_version, first = next(iter(summaries.items()))
    assert first["gold"][0] == 1.0
    assert all(reward == 0.0 for name, (reward, *_) in first.items() if name.startswith(("1050", "5000", "100000", "deep", "5000-digit", "huge")))
    assert first["verify 1050 deep"][2] == [game.REWARD_FILE, game.VERDICT_FILE]
    for version, summary in summaries.items():
        assert summary == first, "Python %s and %s disagree" % (version, first_version)


def test_a_name_that_is_not_utf8_is_answered_not_crashed(game_dir, world):
    """A shell can pass any bytes; the answer is printed and the record logged (ASCII escapes)."""
    env = dict(os.environ, TEXTCRAFT_DIR=str(game_dir))
    command = [sys.executable, "-I", str(game_dir / "textcraft_game.py"), "craft", b"\xff".decode("utf-8", "surrogateescape"), "3", "a=1"]
    result = subprocess.run(command, capture_output=True, env=env)
    assert result.returncode == 1 and result.stdout.startswith(b"Error: No recipe found for ")
    assert b"Traceback" not in result.stderr
    record = json.loads(log_lines(game_dir)[0])
    assert record["ok"] is False
    verdict = game.score_log(world, json.loads((game_dir / "task.json").read_text()), (game_dir / "actions.jsonl").read_bytes())
    assert "invalid action log" not in verdict.reason
