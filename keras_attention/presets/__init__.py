"""The translators shipped with the package, loadable by name and offline.

Each folder beside this file is a preset (`Translator.save_to_preset`'s
layout, with its weights stored in float16 and a model card, `README.md`),
installed with the package as its data: `pip install keras-attention` and no
network are enough. `builtin_presets()` lists them (what
`Translator.presets` and the keras-hub classes' `presets` give), and
`preset_path(name)` gives a name's folder, which every `from_preset`
resolves:

>>> from keras_attention import Translator
>>> sorted(Translator.presets)
['tatoeba_en_es', 'tatoeba_es_en']
>>> Translator.from_preset("tatoeba_en_es").translate(["I left the red book here."])
>>> keras_hub.models.Seq2SeqLM.from_preset(preset_path("tatoeba_en_es"))  # keras-hub's own

keras-hub has no public way to register another package's preset names
(its registry is in `keras_hub.src`), so keras-hub's base classes take the
folder (`preset_path(name)`); this package's classes
(`Translator`, `hub.TransformerSeq2SeqLM`, `hub.TransformerBackbone`, ...)
take the name too.
"""

import json
import os
import warnings

DIRECTORY = os.path.dirname(os.path.abspath(__file__))
# The part of a shipped preset's metadata.json that `builtin_presets` shows.
ZOO_KEY = "zoo"


def builtin_presets():
    """`{name: metadata}` of the shipped presets: each one's description,
    languages, parameter count, size on disk, test scores (with the
    sacreBLEU signature), licence, and `path` (its local folder), read from
    its `metadata.json`. A new dict each call (callers may change it)."""
    presets = {}
    for name in sorted(os.listdir(DIRECTORY)):
        metadata_file = os.path.join(DIRECTORY, name, "metadata.json")
        if not os.path.isfile(metadata_file):
            continue
        with open(metadata_file, encoding="utf-8") as f:
            metadata = json.load(f)
        presets[name] = {**metadata.get(ZOO_KEY, {}), "path": os.path.join(DIRECTORY, name)}
    return presets


def preset_path(preset):
    """The folder of the shipped preset named `preset`; anything else (a
    path, a `kaggle://` or `hf://` handle) unchanged.

    The rule when a name is both (keras-hub's: an existing path wins): a
    folder or file of that name in the working directory is what the name
    means, with a warning that it hides the shipped preset, which stays
    reachable as `preset_path`'s folder (`keras_attention.presets.DIRECTORY`).
    `save_to_preset("tatoeba_en_es")` then `from_preset("tatoeba_en_es")`
    loads what was saved."""
    if isinstance(preset, str) and preset and os.sep not in preset and "/" not in preset:
        folder = os.path.join(DIRECTORY, preset)
        if os.path.isfile(os.path.join(folder, "metadata.json")):
            if os.path.exists(preset):
                warnings.warn(
                    f"{preset!r} is a path in the working directory ({os.path.abspath(preset)}) "
                    "and the name of a shipped preset: the path is loaded. Load the shipped "
                    f"one from {folder!r}, or rename the folder.", UserWarning, stacklevel=3)
                return preset
            return folder
    return preset


class classproperty:  # noqa: N801  (used as a decorator, like `property`)
    """A read-only property of a class (`Translator.presets`), as keras-hub's
    `Backbone.presets` is; Python's own `classmethod(property)` is gone in 3.13."""

    def __init__(self, getter):
        self.getter = getter
        self.__doc__ = getter.__doc__

    def __get__(self, instance, owner):
        return self.getter(owner)


__all__ = ["DIRECTORY", "builtin_presets", "classproperty", "preset_path"]
