"""TextCraft-Synth, the dataset: a ``datasets`` builder for every config, and the project's command line.

>>> from datasets import load_dataset
>>> tasks = load_dataset("apurvaga/textcraft-synth")            # the Parquet files, no script runs
>>> from textcraft_synth import TextCraftSynth                    # or rebuild a config from data/
>>> builder = TextCraftSynth(config_name="medium")
>>> builder.download_and_prepare(); medium = builder.as_dataset()

``python -m textcraft_synth --help`` lists the commands (``build-data``, ``build``, ``replay``, ``sft``,
``eval``, ``export-harbor``, ``verify-export``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from tcsynth import game, records, store
from tcsynth.configs import CONFIGS, DEFAULT_CONFIG
from tcsynth.env import NO_LIMIT, TextCraftEnv
from tcsynth.game import Game, Verdict, World, parse_tool_call, replay
from tcsynth.records import engine_task, gold_tool_calls, source_from_row, source_line
from tcsynth.rewards import get_textcraft_reward, textcraft_reward

__all__ = [
    "TextCraftSynth",
    "TextCraftSynthConfig",
    "TextCraftEnv",
    "NO_LIMIT",
    "textcraft_reward",
    "get_textcraft_reward",
    "Game",
    "World",
    "Verdict",
    "replay",
    "parse_tool_call",
    "engine_task",
    "gold_tool_calls",
    "source_from_row",
    "source_line",
    "load_world",
    "verify_row",
    "main",
]

_DESCRIPTION = (
    "TextCraft-Synth (textcraft-synth@1): crafting played in text, where an LLM agent has to plan many "
    "steps ahead. 3,154 tasks (2,522 train, 632 val) with gold trajectories, over a world of "
    "1,452 items and recipes up to 12 levels deep."
)
_HOMEPAGE = "https://huggingface.co/datasets/apurvaga/textcraft-synth"
_LICENSE = "MIT"
_CITATION = """\
@article{gandhi2026rao,
  title   = {Recursive Agent Optimization},
  author  = {Gandhi, Apurva and Chakraborty, Satyaki and Wang, Xiangjun and Kumar, Aviral and Neubig, Graham},
  journal = {arXiv preprint arXiv:2605.06639},
  year    = {2026}
}
"""


# The builder classes subclass ``datasets`` types, and importing ``datasets`` costs most of a second.  They
# are defined on first use (PEP 562 ``__getattr__`` below), so ``python -m textcraft_synth`` and the
# re-exported helpers start without it, while ``from textcraft_synth import TextCraftSynth`` works as before.
_BUILDER_NAMES = ("TextCraftSynth", "TextCraftSynthConfig")


def _define_builder() -> None:
    """Import ``datasets``, define :class:`TextCraftSynthConfig` and :class:`TextCraftSynth` as module globals."""
    from dataclasses import dataclass
    from typing import Tuple

    import datasets
    from datasets.builder import Key


    @dataclass
    class TextCraftSynthConfig(datasets.BuilderConfig):
        """Settings of one TextCraft-Synth config.

        Args:
            records_dir (`str`, *optional*): the ``data/`` directory to read the records from; defaults to the
                checkout's, else the Hub dataset's records.
            difficulties (`tuple[str, ...]`, *optional*): keep only rows of these difficulties
                (``easy``, ``medium``, ``hard``, ``extreme``); ignored by ``recipes``, whose rows have none.
            verify (`bool`, defaults to `True`): replay every task's gold trajectory in the engine while
                generating, and fail on one that does not reach the goal.
        """

        records_dir: Optional[str] = None
        difficulties: Optional[Tuple[str, ...]] = None
        verify: bool = True

        def __post_init__(self):
            super().__post_init__()
            self.validate()

        def validate(self) -> None:
            """Raise ``ValueError`` naming a bad setting (``datasets`` sets keyword options after construction)."""
            if self.difficulties is not None:
                if isinstance(self.difficulties, str):
                    self.difficulties = (self.difficulties,)
                self.difficulties = tuple(self.difficulties)
                unknown = [d for d in self.difficulties if d not in records.DIFFICULTIES]
                if unknown:
                    raise ValueError(
                        "unknown difficulties %s; choose from %s" % (unknown, ", ".join(records.DIFFICULTIES))
                    )

    class TextCraftSynth(datasets.GeneratorBasedBuilder):
        """Every config of the dataset, generated from the records in ``data/`` (see ``tcsynth.configs``)."""

        BUILDER_CONFIG_CLASS = TextCraftSynthConfig
        BUILDER_CONFIGS = [TextCraftSynthConfig(name=spec.name, description=spec.description) for spec in CONFIGS.values()]
        DEFAULT_CONFIG_NAME = DEFAULT_CONFIG

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.config.validate()

        def _info(self) -> datasets.DatasetInfo:
            spec = CONFIGS[self.config.name]
            return datasets.DatasetInfo(
                description=_DESCRIPTION + " " + spec.description,
                features=spec.features,
                homepage=_HOMEPAGE,
                license=_LICENSE,
                citation=_CITATION,
            )

        def _split_generators(self, dl_manager):
            return [datasets.SplitGenerator(name=split, gen_kwargs={"split": split}) for split in CONFIGS[self.config.name].splits]

        def _generate_examples(self, split: str):
            spec = CONFIGS[self.config.name]
            data = store.load_records(store.resolve_data_dir(Path(self.config.records_dir) if self.config.records_dir else None))
            from tcsynth import build  # the builder's rows are the build's (loaded with the builder, not the CLI)

            rows = build.config_rows(spec, data, split)
            world = data.world if spec.holds_tasks and self.config.verify else None
            for number, row in enumerate(rows):
                difficulty = row.get("difficulty")  # recipe rows have none
                if self.config.difficulties and difficulty is not None and difficulty not in self.config.difficulties:
                    continue
                if world is not None:
                    verify_row(row, world)
                yield Key(0, number), row

    # Module-level names, so pickling and ``datasets``' hashing find the classes where they are imported from.
    for cls in (TextCraftSynthConfig, TextCraftSynth):
        cls.__module__ = __name__
        cls.__qualname__ = cls.__name__
        globals()[cls.__name__] = cls


def __getattr__(name: str) -> Any:
    if name in _BUILDER_NAMES:
        _define_builder()
        return globals()[name]
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def __dir__() -> list:
    return sorted(set(globals()) | set(_BUILDER_NAMES))


def load_world(data_dir: Optional[Path] = None) -> World:
    """The engine's :class:`World`: the one the package carries (textcraft-synth@1), or ``data_dir``'s."""
    return store.load_world(Path(data_dir) if data_dir is not None else None)


def verify_row(row, world: World) -> Verdict:
    """Replay a task row's gold trajectory; raise ``ValueError`` unless it reaches the goal."""
    verdict = replay(world, engine_task(row), gold_tool_calls(row))
    if not verdict.success:
        raise ValueError("%s: the gold trajectory fails: %s" % (row["name"], verdict.reason))
    return verdict


def main(argv=None) -> int:
    """Run one command (``main(["replay", "val:3", "--gold"])``); returns its exit status."""
    from tcsynth.cli import main as cli_main

    return cli_main(argv)


def console() -> None:
    """The ``textcraft-synth`` command and ``python -m textcraft_synth``: run, then exit the process."""
    from tcsynth.cli import entry

    entry()


if __name__ == "__main__":
    console()
