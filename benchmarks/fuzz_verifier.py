"""A long random fuzz run of the game's untrusted-input side: the log reader and grader, and the command's parser.

    python benchmarks/fuzz_verifier.py [--examples 200000] [--seed 0] [--save DIR]

``tests/test_game_fuzz.py`` checks a fixed, derandomized set of examples in CI; this script draws as many
new ones as asked, from its own generator (``random``, seeded), and holds each to the same properties:

* grading any bytes raises nothing and gives 0.0 or 1.0 with a reason;
* 1.0 only when the same calls replay through ``Game`` to success and the log is byte for byte what the
  command writes for them;
* the command's parser refuses words (``BadCommand``) or returns a call whose record the reader takes back.

Logs start as honest episodes of the shortest gold task of each difficulty (gold crafts mixed with random
calls), then get one to four mutations: bytes flipped, lines cut, swapped, duplicated or renumbered, values
nested up to 5,000 deep, runs of up to 70,000 bytes inserted, the log truncated, ``ok`` flipped, records
appended or re-encoded.  It prints examples per second, the reward mix, the most common reasons, and every
failure (saved to --save when given).
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tcsynth import game, records, store  # noqa: E402

ODD_NAMES = ["", "[", '"', "\\", "\u0663", "x" * 40, "\udcff", "a\nb", "\u00e9"]
ODD_NUMBERS = [0, -1, True, False, 1.5, "2", None, [], 10 ** 17, 10 ** 18, -(10 ** 17)]
INFLATIONS = [b"[", b"]", b"{", b"}", b'"', b"\\", b"9", b"0", b"-", b" ", b",", b":", b"\\u0000", b"\xff", b"\r", b"\n"]
WORD_PIECES = list("0123456789-+_ =.e[]{}\",:xa") + ["\u0663", "\uff17", "\u00b2", "\udcff", "raw_a1", "--json"]


def pick_rows(data):
    chosen = {}
    for row in data.tasks["train"]:
        best = chosen.get(row["difficulty"])
        if best is None or len(row["gold_trajectory"]) < len(best["gold_trajectory"]):
            chosen[row["difficulty"]] = row
    return [chosen[key] for key in sorted(chosen)]


def random_plan(rng, row):
    gold = [("craft", {"ingredients": ingredients, "target": [item, total]}) for item, total, ingredients in records.gold_steps(row)]
    names = sorted({call[1]["target"][0] for call in gold} | {n for call in gold for n in call[1]["ingredients"]}) + ODD_NAMES
    plan = gold[: rng.randint(0, len(gold))] if rng.random() < 0.8 else list(gold)
    for _ in range(rng.randint(0, 5)):
        roll = rng.random()
        if roll < 0.5:
            ingredients = {rng.choice(names): rng.choice(ODD_NUMBERS + [rng.randint(1, 12)]) for _ in range(rng.randint(0, 4))}
            call = ("craft", {"ingredients": ingredients, "target": [rng.choice(names), rng.choice(ODD_NUMBERS + [rng.randint(1, 12)])]})
        elif roll < 0.8:
            call = ("get_info", {"items": [rng.choice(names) for _ in range(rng.randint(0, 5))]})
        else:
            call = ("view_inventory", {})
        plan.insert(rng.randint(0, len(plan)), call)
    if rng.random() < 0.7:
        plan.append(("finish", {"message": rng.choice(["done", "", "fin \u00e9"])}))
    return plan


def honest_log(world, row, plan):
    episode = game.Game.for_task(world, records.engine_task(row))
    lines = []
    for tool, arguments in plan:
        if episode.finished or game.record_problem(tool, arguments) is not None:
            break
        answer = episode.call(tool, arguments)
        lines.append(game.format_record(len(lines) + 1, tool, arguments, game.craft_succeeded(answer) if tool == "craft" else None))
    return b"".join(lines)


def mutate(rng, data):
    for _ in range(rng.randint(1, 4)):
        lines = data.splitlines(keepends=True)
        kind = rng.choice(["flip", "cut", "swap", "duplicate", "renumber", "nest", "inflate", "truncate", "ok", "append", "splice"])
        if kind == "flip" and data:
            at = rng.randrange(len(data))
            data = data[:at] + bytes([rng.randrange(256)]) + data[at + 1:]
        elif kind == "cut" and lines:
            del lines[rng.randrange(len(lines))]
            data = b"".join(lines)
        elif kind == "swap" and len(lines) > 1:
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            data = b"".join(lines)
        elif kind == "duplicate" and lines:
            at = rng.randrange(len(lines))
            lines.insert(at, lines[at])
            data = b"".join(lines)
        elif kind == "renumber" and lines:
            at = rng.randrange(len(lines))
            number = rng.choice([rng.randint(-2, len(lines) + 2), 0, 10 ** 18, 10 ** 19])
            lines[at] = lines[at].replace(b'{"seq":%d,' % (at + 1), b'{"seq":%d,' % number, 1)
            data = b"".join(lines)
        elif kind == "nest" and data:
            depth, at, width = rng.randint(1, 5000), rng.randrange(len(data)), rng.randint(0, 8)
            opener, closer = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
            data = data[:at] + opener * depth + data[at:at + width] + closer * depth + data[at + width:]
        elif kind == "inflate":
            at = rng.randint(0, len(data))
            data = data[:at] + rng.choice(INFLATIONS) * rng.choice([1, 2, 10, 1000, 70000]) + data[at:]
        elif kind == "truncate" and data:
            data = data[: rng.randrange(len(data))]
        elif kind == "ok":
            data = data.replace(b'"ok":true', b'"ok":false', 1) if rng.random() < 0.5 else data.replace(b'"ok":false', b'"ok":true', 1)
        elif kind == "append":
            data += game.format_record(len(lines) + 1, rng.choice(["view_inventory", "finish"]), {} if rng.random() < 0.5 else {"message": "x"})
        elif kind == "splice" and lines:
            at = rng.randrange(len(lines))
            try:
                record = json.loads(lines[at])
            except (ValueError, RecursionError):  # after a "nest" mutation, too deep for json itself
                continue
            style = rng.choice([{}, {"ensure_ascii": False}, {"separators": (",", ":"), "sort_keys": True}])
            lines[at] = json.dumps(record, **style).encode("utf-8", "surrogatepass") + b"\n"
            data = b"".join(lines)
    return data


def check_log(world, row, data):
    """Problems found with the grading of ``data`` (empty when every property holds), and the verdict."""
    task = records.engine_task(row)
    verdict = game.score_log(world, task, data)
    problems = []
    if verdict.reward not in (0.0, 1.0) or not verdict.reason:
        problems.append("reward %r, reason %r" % (verdict.reward, verdict.reason))
    if verdict.reward == 1.0:
        logged = [json.loads(line) for line in data.decode("ascii").splitlines()]
        replayed = game.replay(world, task, [{"tool": r["tool"], "args": r["args"]} for r in logged])
        rebuilt = b"".join(
            game.format_record(n, r["tool"], r["args"], game.craft_succeeded(answer) if r["tool"] == "craft" else None)
            for n, (r, answer) in enumerate(zip(logged, replayed.observations), 1)
        )
        if replayed.reward != 1.0 or rebuilt != data:
            problems.append("scored 1.0, but the replay gives %s and the rebuilt log %s" % (replayed.reward, "differs" if rebuilt != data else "matches"))
    return problems, verdict


def random_words(rng):
    command = rng.choice(["craft", "info", "get_info", "inventory", "finish", "craft", "dance"])
    if command in ("craft", "info") and rng.random() < 0.4:
        value = rng.choice([{"ingredients": {rng.choice(ODD_NAMES): rng.choice(ODD_NUMBERS)}, "target": [rng.choice(ODD_NAMES), rng.choice(ODD_NUMBERS)]},
                            [rng.choice(ODD_NAMES)], rng.choice(ODD_NUMBERS)])
        text = json.dumps(value)
        if rng.random() < 0.3:
            depth = rng.randint(1, 5000)
            text = "[" * depth + text + "]" * depth
        return [command, "--json", text]
    return [command] + ["".join(rng.choice(WORD_PIECES) for _ in range(rng.randint(0, 8))) for _ in range(rng.randint(0, 5))]


def check_words(words):
    try:
        tool, arguments = game.read_command(words)
    except game.BadCommand as problem:
        return [] if "\n" not in str(problem) else ["a multi-line BadCommand"]
    line = game.format_record(1, tool, arguments, False)
    try:
        (logged,) = game.read_log(line)
    except game.LogFault as fault:
        return ["the parser accepted %r but the reader refuses its record: %s" % (words, fault)]
    return [] if (logged.tool, logged.args) == (tool, arguments) else ["the record does not read back the same"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200000, help="logs to grade (and as many command lines to parse)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", help="directory for the inputs of failures")
    args = parser.parse_args()
    data = store.load_records(store.DEFAULT_DATA_DIR)
    world = game.World(data.world_document)
    rows = pick_rows(data)
    rng = random.Random(args.seed)
    rewards, reasons, failures = collections.Counter(), collections.Counter(), []
    started = time.perf_counter()
    log_seconds = word_seconds = 0.0
    for number in range(args.examples):
        row = rng.choice(rows)
        log = honest_log(world, row, random_plan(rng, row))
        if rng.random() < 0.9:
            log = mutate(rng, log)
        words = random_words(rng)
        begun = time.perf_counter()
        try:
            problems, verdict = check_log(world, row, log)
            rewards[verdict.reward] += 1
            reasons[verdict.reason.split(":")[0] if "line" not in verdict.reason else " ".join(verdict.reason.split()[5:9])] += 1
        except Exception:  # anything escaping the grader is a finding
            problems = ["raised: " + traceback.format_exc(limit=3)]
        middle = time.perf_counter()
        try:
            problems += check_words(words)
        except Exception:
            problems += ["the parser raised on %r: %s" % (words, traceback.format_exc(limit=3))]
        log_seconds += middle - begun
        word_seconds += time.perf_counter() - middle
        if problems:
            failures.append((number, problems))
            if args.save:
                Path(args.save).mkdir(parents=True, exist_ok=True)
                (Path(args.save) / ("failure-%d.jsonl" % number)).write_bytes(log)
                (Path(args.save) / ("failure-%d.words.json" % number)).write_text(json.dumps(words))
    total = time.perf_counter() - started
    print("%d logs graded and %d command lines parsed in %.1f s (generation included): %.0f examples/s" % (args.examples, args.examples, total, args.examples / total))
    print("grading alone: %.0f logs/s; parsing alone: %.0f command lines/s" % (args.examples / log_seconds, args.examples / word_seconds))
    print("rewards: %s" % dict(rewards))
    print("most common reasons:")
    for reason, count in reasons.most_common(12):
        print("  %7d  %s" % (count, reason))
    print("failures: %d" % len(failures))
    for number, problems in failures[:20]:
        print("  example %d: %s" % (number, "; ".join(problems)[:500]))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
