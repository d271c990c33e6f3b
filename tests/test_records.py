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


@pytest.mark.parametrize("split", records.SPLITS)
def test_rows_equal_the_shared_source_byte_for_byte(data, source_dir, split):
    assert records.source_file_bytes(data.tasks[split]) == (source_dir / records.SOURCE_FILES[split]).read_bytes()


def test_recipes_json_is_the_source_world(data, source_dir):
    assert data.recipes_bytes == (source_dir / records.RECIPES_FILE).read_bytes()
    assert hashlib.sha256(data.recipes_bytes).hexdigest().startswith("a020eec2")


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
