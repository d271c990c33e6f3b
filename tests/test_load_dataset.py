"""`load_dataset` on the checkout (datasets 5.x, Parquet + README configs) and the builder class agree."""

from __future__ import annotations

import datasets
import pytest

from tcsynth import configs, records, store
from tcsynth.configs import CONFIGS, TASKS, arrow_schema, features
from textcraft_synth import TextCraftSynth

EXPECTED_ROWS = {
    "tasks": {"train": 2522, "val": 632},
    "easy": {"train": 588, "val": 147},
    "medium": {"train": 852, "val": 213},
    "hard": {"train": 544, "val": 136},
    "extreme": {"train": 538, "val": 136},
    "recipes": {"train": 1452},
    "sft": {"train": 2522, "val": 632},
    "sft-sequential": {"train": 2522, "val": 632},
    "sft-recursive": {"train": 26541, "val": 6585},
    "sft-easy": {"train": 588, "val": 147},
    "sft-medium": {"train": 852, "val": 213},
    "sft-hard": {"train": 544, "val": 136},
    "sft-extreme": {"train": 538, "val": 136},
}


@pytest.fixture(scope="module")
def hf_cache(tmp_path_factory, monkeypatch_module):
    cache = tmp_path_factory.mktemp("hf")
    monkeypatch_module.setenv("HF_HOME", str(cache))
    monkeypatch_module.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch_module.setenv("HF_DATASETS_OFFLINE", "1")
    return cache


@pytest.fixture(scope="module")
def monkeypatch_module():
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()


def test_configs_cover_every_expected_config():
    assert set(CONFIGS) == set(EXPECTED_ROWS)


@pytest.mark.parametrize("config", sorted(EXPECTED_ROWS))
def test_load_dataset_counts_and_schema(repo, hf_cache, config):
    loaded = datasets.load_dataset(str(repo), config, cache_dir=str(hf_cache / "datasets"))
    assert {split: len(rows) for split, rows in loaded.items()} == EXPECTED_ROWS[config]
    for split in loaded:
        assert loaded[split].features == CONFIGS[config].features
    if "difficulty" in CONFIGS[config].features:
        wanted = config.replace("sft-", "")
        assert set(loaded["val"]["difficulty"]) == ({wanted} if wanted in records.DIFFICULTIES else set(records.DIFFICULTIES))
    if CONFIGS[config].holds_tasks:
        assert loaded["train"].features == features(TASKS)


def test_default_config_is_tasks(repo, hf_cache):
    train = datasets.load_dataset(str(repo), split="train", cache_dir=str(hf_cache / "datasets"))
    assert train[0]["goal"] == "Craft the following items: 3x a1_i5"
    assert train[0]["gold_trajectory"][0] == {
        "item": "a9_i1", "crafts": 4, "count": 12, "ingredients": [{"item": "raw_a1", "count": 8}],
    }


@pytest.mark.parametrize("config", ["tasks", "hard", "recipes", "sft-easy"])
def test_builder_generates_the_parquet_rows(repo, tmp_path, config):
    builder = TextCraftSynth(config_name=config, cache_dir=str(tmp_path))
    builder.download_and_prepare()
    built = builder.as_dataset()
    for split in CONFIGS[config].splits:
        path = store.parquet_path(repo / "data", config, split)
        parquet = datasets.Dataset.from_parquet(str(path), cache_dir=str(tmp_path / "parquet"))
        assert built[split].to_list() == parquet.to_list()
        assert built[split].features == CONFIGS[config].features


def test_builder_difficulty_option_filters_rows(tmp_path, data):
    builder = TextCraftSynth(config_name="tasks", difficulties=("easy", "extreme"), cache_dir=str(tmp_path))
    builder.download_and_prepare()
    val = builder.as_dataset(split="val")
    assert len(val) == 147 + 136
    assert val["name"] == [row["name"] for row in data.tasks["val"] if row["difficulty"] in ("easy", "extreme")]


def test_builder_rejects_unknown_difficulties():
    with pytest.raises(ValueError, match="unknown difficulties"):
        TextCraftSynth(config_name="tasks", difficulties=("impossible",))


@pytest.fixture(scope="module")
def small_world(tmp_path_factory):
    """A generated world's data/ directory: records the builder has not seen."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("world") / "w"
    subprocess.run([sys.executable, "-m", "textcraft_synth", "generate-world", "--seed", "3", "--out", str(out), "-q",
                    "--train", "12", "--val", "8"], check=True, capture_output=True)
    return out / "data"


def test_builder_reads_records_dir(tmp_path, small_world):
    builder = TextCraftSynth(config_name="tasks", records_dir=str(small_world), cache_dir=str(tmp_path))
    builder.download_and_prepare()
    val = builder.as_dataset(split="val")
    assert len(val) == 8 and val[0]["name"].startswith("textcraft-synth-s3-val-")
    assert val.to_list() == store.load_records(small_world).tasks["val"]


def test_builder_verify_replays_gold_and_can_be_turned_off(tmp_path, small_world):
    import shutil

    # A records directory whose first val task lost its last gold craft: verify refuses it, verify=False not.
    broken = tmp_path / "broken"
    shutil.copytree(small_world, broken)
    data = store.load_records(broken)
    data.tasks["val"][0]["gold_trajectory"].pop()
    path = store.parquet_path(broken, records.TASKS_CONFIG, "val")
    path.write_bytes(store.parquet_bytes(data.tasks["val"], arrow_schema(TASKS)))
    strict = TextCraftSynth(config_name="tasks", records_dir=str(broken), cache_dir=str(tmp_path / "a"))
    with pytest.raises(Exception) as caught:  # datasets wraps it in DatasetGenerationError
        strict.download_and_prepare()
    assert "%s: the gold trajectory fails" % data.tasks["val"][0]["name"] in str(caught.value.__cause__ or caught.value)
    lenient = TextCraftSynth(config_name="tasks", records_dir=str(broken), verify=False, cache_dir=str(tmp_path / "b"))
    lenient.download_and_prepare()
    assert len(lenient.as_dataset(split="val")) == 8


@pytest.mark.parametrize("kind", sorted({spec.kind for spec in CONFIGS.values()}))
def test_the_arrow_schema_is_what_datasets_derives_from_the_features(kind, repo):
    """The build writes Parquet with a schema made by pyarrow alone; it must be datasets' own, metadata too,
    and every committed file of that kind must carry it."""
    import pyarrow.parquet as pq

    assert arrow_schema(kind).equals(features(kind).arrow_schema, check_metadata=True)
    assert features(kind).to_dict() == configs.FEATURE_DICTS[kind]
    for spec in CONFIGS.values():
        for split in spec.splits if spec.kind == kind else ():
            path = repo / "data" / spec.name / ("%s.parquet" % split)
            if path.exists():
                assert pq.read_schema(path).metadata[b"huggingface"] == arrow_schema(kind).metadata[b"huggingface"], path
