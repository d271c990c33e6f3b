"""GRPO on TextCraft-Synth tasks with the textcraft reward, on a CPU and offline: a runnable smoke test.

The README's GRPO example trains ``Qwen/Qwen2.5-0.5B-Instruct`` from the Hub on a GPU.  This one runs the
same pipeline anywhere, in about a minute: a tiny Llama-shaped model with random weights and a small BPE
tokenizer carrying Qwen2.5's chat template (both made here, nothing downloaded), the easy val tasks read
from this checkout's ``data/``, ``use_cpu=True`` and two optimisation steps.  The model is untrained, so
its completions score 0.0: the point is that every piece (prompts, generation, reward, update) runs.

    python scripts/grpo_cpu_example.py                    # two steps, prints the logged rewards
    python scripts/grpo_cpu_example.py --steps 4 --tasks 8

Swap in a real model by passing its name as ``model=`` and its tokenizer as ``processing_class=``; the
reward takes the tokenizer so that it reads completions with transformers' ``parse_response``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script from anywhere: use this checkout's package
    sys.path.insert(0, str(REPO))

from tcsynth import prompts, store  # noqa: E402
from tcsynth.rewards import get_textcraft_reward  # noqa: E402

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def task_dataset(count: int):
    """The first ``count`` easy val tasks as a GRPO dataset: a ``prompt`` plus the two task columns."""
    import datasets

    tasks = [row for row in store.load_records().tasks["val"] if row["difficulty"] == "easy"][:count]
    return datasets.Dataset.from_list(
        [
            {
                "prompt": [
                    {"role": "system", "content": prompts.SYSTEM_PROMPT},
                    {"role": "user", "content": prompts.user_prompt(row["goal"])},
                ],
                "target_items": row["target_items"],
                "initial_inventory": row["initial_inventory"],
            }
            for row in tasks
        ]
    )


def tiny_tokenizer(texts: Sequence[str], vocab_size: int = 512):
    """A byte-level BPE tokenizer trained on ``texts``, with Qwen2.5's chat template and response template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import add_response_schema, qwen2_5_chat_template

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=SPECIAL_TOKENS,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = qwen2_5_chat_template
    return add_response_schema(tokenizer)


def tiny_model(tokenizer, max_positions: int = 2048):
    """A two-layer Llama-shaped causal LM with random weights, sized to ``tokenizer`` (the SFT test trains
    one too, on conversations up to ``max_positions`` tokens)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=max_positions,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    return LlamaForCausalLM(config)


def run(output_dir: str, steps: int = 2, tasks: int = 4, completion_length: int = 24) -> List[Dict[str, Any]]:
    """Train for ``steps`` GRPO steps; returns the trainer's log history."""
    from trl import GRPOConfig, GRPOTrainer

    dataset = task_dataset(tasks)
    texts = [message["content"] for prompt in dataset["prompt"] for message in prompt] + [json.dumps(prompts.TOOLS)]
    texts.append('<tool_call>\n{"name": "finish", "arguments": {"message": "Crafted."}}\n</tool_call>')
    tokenizer = tiny_tokenizer(texts)
    args = GRPOConfig(
        output_dir=output_dir,
        use_cpu=True,
        max_steps=steps,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=completion_length,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        activation_checkpointing=False,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=tiny_model(tokenizer),
        reward_funcs=get_textcraft_reward(tokenizer=tokenizer),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.train()
    return trainer.state.log_history


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2, help="optimisation steps (default: %(default)s)")
    parser.add_argument("--tasks", type=int, default=4, help="easy val tasks in the dataset (default: %(default)s)")
    parser.add_argument("--output-dir", default=None, help="trainer output directory (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.tasks < 2:
        parser.error("--steps must be at least 1 and --tasks at least 2")
    with tempfile.TemporaryDirectory(prefix="grpo-textcraft-") as scratch:
        history = run(args.output_dir or scratch, steps=args.steps, tasks=args.tasks)
    for entry in history:
        if "reward" in entry:
            print("step %d: loss %s, textcraft reward %.3f" % (entry.get("step", 0), entry.get("loss"), entry["reward"]))
    finite = all(math.isfinite(entry["loss"]) for entry in history if "loss" in entry)
    return 0 if finite else 1


if __name__ == "__main__":
    sys.exit(main())
