"""The records in data/ are the source files, losslessly, with the public row schema."""

from __future__ import annotations

import hashlib
import json

import pytest

from tcsynth import records


@pytest.mark.parametrize("split", records.SPLITS)
def test_rows_serialize_back_to_the_source_file(data, split):
    rebuilt = records.source_file_bytes(data.tasks[split])
    filename = records.SOURCE_FILES[split]
    assert hashlib.sha256(rebuilt).hexdigest() == records.SOURCE_SHA256[filename]


def test_the_published_hashes_are_pinned():
    # The SHA-256 of the files platoon-textcraft 0.3.0 publishes (SPEC §1); data/ must reproduce them.
    assert records.SOURCE_SHA256 == {
        "textcraft_synth_train.jsonl": "685823fbca90aa89e061e61fef58d0122def4221eed14cf2c8c730341363a00f",
        "textcraft_synth_val.jsonl": "84a123ee46e29e65f4d7b95f4943aa56907fc3fd5992268faa749602579dfc0c",
        "recipes.json": "a020eec273337c66b35c0fc487664e35c44da65ad18e9afffe6a4c25af949f10",
    }


def test_recipes_json_is_the_published_world(data):
    assert hashlib.sha256(data.recipes_bytes).hexdigest() == records.SOURCE_SHA256["recipes.json"]


@pytest.mark.parametrize("name", sorted(records.SOURCE_SHA256) + [records.LICENSE_FILE])
def test_rebuilt_source_equals_a_maintainers_copy(source_dir, shared_source, name):
    # Opt-in (TEXTCRAFT_SOURCE): the files rebuilt from data/ against the originals, byte for byte.
    assert (source_dir / name).read_bytes() == (shared_source / name).read_bytes()


def test_goals_are_the_targets_written_out(data):
    for rows in data.tasks.values():
        for row in rows:
            targets = records.list_to_counts(row["target_items"])
            assert row["goal"] == records.goal_text(targets)
            assert records.parse_goal(row["goal"]) == targets


@pytest.mark.parametrize("goal", ["Craft: 3x a", "Craft the following items: 0x a", "Craft the following items: 3x a, 2x a", "Craft the following items: 3 a"])
def test_parse_goal_refuses_text_that_is_not_a_goal(goal):
    with pytest.raises(records.UserError):
        records.parse_goal(goal)


def test_counts_per_split_and_difficulty(data):
    expected = {
        "train": {"easy": 588, "medium": 852, "hard": 544, "extreme": 538},
        "val": {"easy": 147, "medium": 213, "hard": 136, "extreme": 136},
    }
    for split, by_difficulty in expected.items():
        rows = data.tasks[split]
        assert len(rows) == sum(by_difficulty.values())
        for difficulty, count in by_difficulty.items():
            assert sum(row["difficulty"] == difficulty for row in rows) == count


def test_row_columns_are_the_public_contract(data):
    row = data.tasks["train"][0]
    assert list(row) == [
        "name", "split", "index", "difficulty", "max_depth", "num_craft_steps", "max_steps", "goal",
        "source_task_id", "env_task_id", "env_split_task_id", "target_items", "initial_inventory", "gold_trajectory",
    ]
    assert set(row["gold_trajectory"][0]) == {"item", "crafts", "count", "ingredients"}
    assert set(row["target_items"][0]) == {"item", "count"}


def test_row_fields_against_the_source_line(data, source_dir):
    lines = (source_dir / records.SOURCE_FILES["val"]).read_text().splitlines()
    seen = {}
    for index, line in enumerate(lines):
        source = json.loads(line)
        row = data.tasks["val"][index]
        misc = source["misc"]
        position = seen.get(misc["difficulty"], 0)
        seen[misc["difficulty"]] = position + 1
        assert row["name"] == "textcraft-synth-val-%s-%05d" % (misc["difficulty"], index)
        assert row["index"] == index and row["split"] == "val"
        assert row["source_task_id"] == source["id"] == "textcraft_synth.val.%d" % index
        assert row["env_task_id"] == "val:%d" % index
        assert row["env_split_task_id"] == "val-%s:%d" % (misc["difficulty"], position)
        assert [(e["item"], e["count"]) for e in row["initial_inventory"]] == list(misc["initial_inventory"].items())
        first = misc["gold_trajectory"][0]
        assert row["gold_trajectory"][0]["crafts"] == first["target"][1]
        assert row["gold_trajectory"][0]["count"] == first["result_count"]


def test_first_train_row_is_the_published_first_task(data):
    row = data.tasks["train"][0]
    assert row["name"] == "textcraft-synth-train-medium-00000"
    assert row["goal"] == "Craft the following items: 3x a1_i5"
    assert row["env_split_task_id"] == "train-medium:0"


def test_source_from_row_inverts_row_from_source(data):
    for split in records.SPLITS:
        for row in data.tasks[split][:50]:
            source = records.source_from_row(row)
            again = records.row_from_source(source, split, row["index"], int(row["env_split_task_id"].split(":")[1]))
            assert again == row


@pytest.mark.parametrize(
    "line, complaint",
    [
        (b'{"goal": "x"', "not valid JSON"),
        (b'[1, 2]', "must be a JSON object"),
        (b'{"goal": "g", "id": "i", "misc": {}, "max_steps": 75}', "keys must be"),
    ],
)
def test_bad_source_lines_are_named_by_file_and_line(line, complaint):
    with pytest.raises(records.SourceError) as caught:
        records.parse_source_file(b'\n'.join([line]) + b"\n", "tasks.jsonl")
    assert str(caught.value).startswith("tasks.jsonl line 1: ")
    assert complaint in str(caught.value)


def test_a_truncated_source_file_is_refused(source_dir):
    data = (source_dir / records.SOURCE_FILES["val"]).read_bytes()
    with pytest.raises(records.SourceError, match="newline"):
        records.parse_source_file(data[:-10], "val.jsonl")
