"""README.md (the dataset card and manual) tells the truth about configs, files and commands."""

from __future__ import annotations

import re

import yaml

from tcsynth import configs
from tcsynth.configs import CONFIGS, DEFAULT_CONFIG


def _card(repo):
    text = (repo / "README.md").read_text()
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, "README.md must start with a YAML header"
    return yaml.safe_load(match.group(1)), text


def test_yaml_configs_match_the_builder_configs_and_files(repo):
    header, _ = _card(repo)
    declared = {entry["config_name"]: entry for entry in header["configs"]}
    assert list(declared) == list(CONFIGS)
    for name, entry in declared.items():
        assert entry.get("default", False) == (name == DEFAULT_CONFIG)
        files = {item["split"]: item["path"] for item in entry["data_files"]}
        assert list(files) == list(CONFIGS[name].splits)
        for split, path in files.items():
            assert path == "data/%s/%s.parquet" % (name, split)
            assert (repo / path).is_file(), path
    assert header["license"] == "mit"


def test_ci_runs_exactly_the_readme_test_command(repo):
    _, text = _card(repo)
    commands = re.findall(r"```bash\n(python3 -m venv[^\n]*)\n```", text)
    test_commands = [c for c in commands if "pytest" in c]
    assert len(test_commands) == 1
    script = (repo / ".ci" / "run").read_text().splitlines()
    # The last line is the README's command; the lines before it only make the fresh clone it runs in.
    assert script[-1] == test_commands[0]
    code = "\n".join(line for line in script if not line.startswith("#"))
    assert "git clone" in code and "shared" not in code


def test_readme_names_only_subcommands_that_exist(repo):
    from tcsynth.cli import parser

    _, text = _card(repo)
    named = set(re.findall(r"python -m textcraft_synth ([a-z][a-z-]+)", text))
    choices = set(parser()._subparsers._group_actions[0].choices)
    assert named and named <= choices, named - choices


def test_every_task_name_and_id_in_the_readme_exists(repo, data):
    _, text = _card(repo)
    rows = [row for rows in data.tasks.values() for row in rows]
    names = {row["name"] for row in rows}
    ids = {row["env_task_id"] for row in rows}
    named = set(re.findall(r"textcraft-synth-(?:train|val)-[a-z]+-\d{5}", text))
    assert named and named <= names, sorted(named - names)
    mentioned_ids = set(re.findall(r"\b(?:train|val):\d+\b", text))
    assert mentioned_ids <= ids, sorted(mentioned_ids - ids)


def test_every_harbor_card_task_name_exists(data):
    from tcsynth import harbor

    card = harbor.card_bytes({split: data.tasks[split] for split in data.tasks}, data.world_name, "org/name").decode()
    named = set(re.findall(r"textcraft-synth-(?:train|val)-[a-z]+-\d{5}", card))
    assert named <= {row["name"] for rows in data.tasks.values() for row in rows}


def test_the_readme_configs_block_is_the_one_the_code_writes(repo):
    # Generated worlds' cards get their `configs:` block from the same function.
    assert configs.card_configs_yaml() in (repo / "README.md").read_text()


def test_the_readme_holds_the_measured_chat_template_matrix(repo):
    # docs/chat-template-matrix.md is kept equal to the measurement by tests/test_chat_templates.py.
    measured = (repo / "docs" / "chat-template-matrix.md").read_text()
    text = (repo / "README.md").read_text()
    block = re.search(r"<!-- chat-template-matrix:[^>]*-->\n(.*?)\n<!-- /chat-template-matrix -->", text, re.S)
    assert block, "README.md lost its chat-template matrix"
    assert block.group(1).strip() == measured[measured.index("| family |"):].strip()
