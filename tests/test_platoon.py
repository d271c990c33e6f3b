"""The card's platoon config, run by platoon 0.4.0 itself (the PyPI package, which needs Python >= 3.12).

The YAML block that README.md and the export's card (``tcsynth/harbor/templates/README.md``) show is taken
from those files, not copied here, so a change to either is what gets checked:

- as printed (with a commit for ``<revision>``), ``platoon config validate`` accepts it; platoon's configs are
  strict, so a misspelt or removed key would fail (checked too, with ``selekt`` and the removed ``image_map``);
- with the Hub dataset swapped for a local export (the Hub cannot be reached here; platoon's ``dataset`` also
  takes a directory), ``split`` for ``val`` and ``provider`` for ``process``, ``platoon prepare`` fetches
  exactly the tasks ``select`` names from ``task-index.json`` and records their one shared image;
- every selected task then runs through platoon's ``harbor`` service: the service is built from the config
  as a run builds it (``platoon.prepare.load_environments`` and ``harbor_service``), the config's harness is
  looked up in platoon's registry, and each session is opened, played and graded by platoon's own code.
  ``platoon-oracle`` (which runs ``solution/solve.sh``) scores 1.0 on every task; ``platoon-noop`` scores 0.0.

Only the harness rollout's model gateway is left out: it needs platoon's ``tinker`` extra (torch and a
Tinker client), and neither harness makes a model call.  The driver gives the harness what it reads of its
context (the session and ``annotate``) and then grades the session, as platoon's ``single`` program does.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

import platoon_venv as platoon_venv_module
from platoon_venv import platoon_env
from tcsynth import harbor, store

REPO = Path(__file__).resolve().parent.parent
CARD_TEMPLATE = REPO / "tcsynth" / "harbor" / "templates" / "README.md"
# Any commit will do for validation: nothing is fetched.
SOME_COMMIT = "0123456789abcdef0123456789abcdef01234567"
SPLIT = "val"
DIFFICULTY = "medium"
LIMIT = 4  # the first 4 val tasks: 1 easy, 3 medium

DRIVER = r"""
import asyncio, json, sys
from platoon.harness.registry import get_harness
from platoon.prepare import harbor_service, load_environments


class Context:
    # What platoon-oracle and platoon-noop read of their AgentContext: the env session, and annotate().
    def __init__(self, session):
        self.session = session
        self.notes = {}

    def annotate(self, **notes):
        self.notes.update(notes)


async def main(config, overrides):
    resolved = load_environments(config, overrides)
    (entry,) = resolved.config.environments
    harness = get_harness(entry.harness)
    service = harbor_service(entry)
    # Without a split manifest or a hold-out, every split lists every task the fetch selected.
    names = await service.list_tasks("train")
    await service.check_tasks("train", names)
    report = {}
    for name in names:
        task = await service.get_task(name)
        session = await service.open(task, rollout_id="test-" + name)
        try:
            context = Context(session)
            result = await harness.fn(context)
            outcome = await session.grade()
        finally:
            await session.close()
        report[name] = {
            "harness": harness.name,
            "agent": result.status,
            "solve_exit_code": context.notes.get("oracle", {}).get("exit_code"),
            "status": outcome.status,
            "reward": outcome.reward,
            "reason": outcome.reason,
            "verifier_mode": outcome.metadata.get("verifier_mode"),
            "test_output": outcome.metadata.get("test_output"),
        }
    print(json.dumps(report))


asyncio.run(main(sys.argv[1], sys.argv[2:]))
"""


def platoon_block(text: str) -> str:
    """The one fenced YAML block of ``text`` that configures platoon's harbor service."""
    blocks = [block for block in re.findall(r"```yaml\n(.*?)```", text, re.S) if "service: harbor" in block]
    assert len(blocks) == 1, "expected one platoon config block, found %d" % len(blocks)
    return blocks[0]


def substitute(text: str, pattern: str, replacement: str) -> str:
    """``text`` with the one match of ``pattern`` replaced; fails when the block no longer has it once."""
    result, count = re.subn(pattern, replacement, text, flags=re.M)
    assert count == 1, "the platoon block should match %r once, matched %d times:\n%s" % (pattern, count, text)
    return result


def readme_block() -> str:
    return platoon_block((REPO / "README.md").read_text())


def card_block() -> str:
    return platoon_block(CARD_TEMPLATE.read_text()).replace("{{repo_id}}", store.HUB_REPO_ID)


def as_printed(block: str) -> str:
    """The block as a user fills it in: a commit for ``<revision>``, a harness for ``<harness>``."""
    block = substitute(block, r"@<revision>", "@" + SOME_COMMIT)
    return substitute(block, r"harness: <harness>", "harness: platoon-oracle")


def offline(block: str, dataset: Path) -> str:
    """The block pointed at a local export, its val tasks, and the process provider."""
    block = substitute(block, r"(dataset: )hf://\S+@<revision>", r"\g<1>" + str(dataset))
    block = substitute(block, r"(select: \{split: )train(, difficulty: )medium\}", r"\g<1>%s\g<2>%s}" % (SPLIT, DIFFICULTY))
    block = substitute(block, r"(provider: )docker\b.*$", r"\g<1>process")
    return substitute(block, r"harness: <harness>", "harness: platoon-oracle")


def platoon(venv: Path, root: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(venv / "bin" / "platoon"), *args], cwd=root, env=platoon_env(root), capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="session")
def platoon_venv(tmp_path_factory) -> Path:
    return platoon_venv_module.venv(tmp_path_factory)


@pytest.fixture(scope="module")
def export(tmp_path_factory, data) -> Path:
    out = tmp_path_factory.mktemp("platoon-export") / "dataset"
    harbor.export_harbor(out, data, splits=[SPLIT], limit=LIMIT)
    return out


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, platoon_venv, export) -> Path:
    """A site whose cache holds the fetched, selected tasks (``platoon prepare`` on the offline config)."""
    root = tmp_path_factory.mktemp("platoon-site")
    platoon_venv_module.site(root)
    (root / "textcraft.yaml").write_text(offline(readme_block(), export))
    result = platoon(platoon_venv, root, "prepare", "textcraft.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].startswith("ready"), result.stdout
    return root


def play(venv: Path, root: Path, harness: str) -> Dict[str, dict]:
    (root / "drive.py").write_text(DRIVER)
    override = "environments.0.harness=" + harness
    result = subprocess.run(
        [str(venv / "bin" / "python"), "drive.py", "textcraft.yaml", override],
        cwd=root,
        env=platoon_env(root),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    return json.loads(result.stdout.splitlines()[-1])


def selected_names(export: Path) -> List[str]:
    index = json.loads((export / "task-index.json").read_text())
    return sorted(name for name, row in index.items() if row["split"] == SPLIT and row["difficulty"] == DIFFICULTY)


def test_readme_and_card_show_the_same_config():
    assert readme_block() == card_block()


@pytest.mark.parametrize("block", [readme_block, card_block], ids=["readme", "card"])
def test_platoon_accepts_the_config_as_printed(platoon_venv, tmp_path, block):
    platoon_venv_module.site(tmp_path)
    (tmp_path / "config.yaml").write_text(as_printed(block()))
    result = platoon(platoon_venv, tmp_path, "config", "validate", "config.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("ok"), result.stdout


@pytest.mark.parametrize(
    "key, says",
    [("selekt", "did you mean environments.0.service_kwargs.select"), ("image_map", "platoon 0.3.0 removed it")],
)
def test_platoon_refuses_unknown_service_kwargs(platoon_venv, tmp_path, key, says):
    """The check above can fail: platoon rejects a key its harbor service does not take."""
    platoon_venv_module.site(tmp_path)
    block = as_printed(readme_block())
    if key == "selekt":
        block = substitute(block, r"(\s)select:", r"\g<1>selekt:")
    else:
        block = substitute(block, r"^(\s+)(provider: .*)$", r"\g<1>\g<2>\n\g<1>image_map: images.json")
    (tmp_path / "config.yaml").write_text(block)
    result = platoon(platoon_venv, tmp_path, "config", "validate", "config.yaml")
    assert result.returncode != 0
    assert says in result.stdout + result.stderr


def test_prepare_fetches_what_select_names(prepared, export):
    (lock_file,) = (prepared / "cache" / "harbor" / "locks").glob("*.lock.json")
    lock = json.loads(lock_file.read_text())
    index = json.loads((export / "task-index.json").read_text())
    tasks = {task["name"]: task for task in lock["tasks"]}
    assert sorted(tasks) == selected_names(export)
    assert len(tasks) == 3
    for name, task in tasks.items():
        assert task["refused"] is None, task["refused"]
        # platoon hashes the task directory with Harbor's content hash: the same digest our index records.
        assert task["digest"] == index[name]["digest"]
        assert task["flags"]["verifier"] == "separate"
        assert task["flags"]["network"] == "no-network"
    # One image for every task and its verifier (the Dockerfiles share their build prefix; the per-task files
    # are copied in when a session opens), recorded as "local" for the process provider.
    keys = {task[image]["key"] for task in tasks.values() for image in ("image", "verifier_image")}
    assert len(keys) == 1
    image_map = json.loads((prepared / "cache" / "harbor" / "images" / "process.json").read_text())
    assert sorted(image_map["images"]) == sorted(keys)


def test_gold_solution_scores_one(platoon_venv, prepared, export):
    report = play(platoon_venv, prepared, "platoon-oracle")
    assert sorted(report) == selected_names(export)
    for name, result in report.items():
        assert result["harness"] == "platoon-oracle"
        assert result["solve_exit_code"] == 0, (name, result)
        assert result["verifier_mode"] == "separate"
        assert (result["status"], result["reward"]) == ("scored", 1.0), (name, result)
        assert "reward=1.0" in result["test_output"]


def test_doing_nothing_scores_zero(platoon_venv, prepared, export):
    report = play(platoon_venv, prepared, "platoon-noop")
    assert sorted(report) == selected_names(export)
    for name, result in report.items():
        assert result["harness"] == "platoon-noop"
        assert (result["status"], result["reward"]) == ("scored", 0.0), (name, result)
        assert "reward=0.0" in result["test_output"]
