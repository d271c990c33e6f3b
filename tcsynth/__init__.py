"""TextCraft-Synth: the records, the engine and the products built from them.

Data flows one way: the records in ``data/`` (:mod:`tcsynth.records`, :mod:`tcsynth.store`) are played by
the engine (:mod:`tcsynth.game`, standard library only) to build every product (:mod:`tcsynth.configs`,
:mod:`tcsynth.build`).  The public entry point is the top-level module ``textcraft_synth``.
"""

__version__ = "1.0.0"
