"""scripts/grpo_cpu_example.py runs: two GRPO steps on CPU, offline, with the textcraft reward logged."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "grpo_cpu_example.py"


def load_script():
    if "grpo_cpu_example" not in sys.modules:
        spec = importlib.util.spec_from_file_location("grpo_cpu_example", SCRIPT)
        module = sys.modules["grpo_cpu_example"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules["grpo_cpu_example"]


def test_two_cpu_steps_offline_with_the_textcraft_reward(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # an empty cache: nothing can come from it
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    script = load_script()
    assert script.main(["--steps", "2", "--tasks", "2", "--output-dir", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.splitlines()
    steps = [line for line in printed if line.startswith("step ")]
    assert [line.split(":")[0] for line in steps] == ["step 1", "step 2"]
    for line in steps:
        reward = float(line.rsplit(" ", 1)[1])
        assert 0.0 <= reward <= 1.0 and "textcraft reward" in line


def test_the_reward_reads_completions_with_the_scripts_tokenizer():
    # The script hands its tokenizer to the reward, which parses completions with it: gold scores 1.0.
    from tcsynth import records, store

    script = load_script()
    dataset = script.task_dataset(2)
    tokenizer = script.tiny_tokenizer([m["content"] for prompt in dataset["prompt"] for m in prompt])
    assert tokenizer.response_template is not None
    task = [row for row in store.load_records().tasks["val"] if row["difficulty"] == "easy"][0]
    assert task["target_items"] == dataset[0]["target_items"]
    gold = "".join("<tool_call>\n%s\n</tool_call>" % json.dumps(call) for call in records.gold_tool_calls(task)) + "<|im_end|>"
    reward = script.get_textcraft_reward(tokenizer=tokenizer)
    columns = {"target_items": [dataset[0]["target_items"]] * 2, "initial_inventory": [dataset[0]["initial_inventory"]] * 2}
    assert reward([gold, gold.replace('"finish"', '"view_inventory"')], **columns) == [1.0, 0.0]
