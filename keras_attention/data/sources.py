"""Where sentence pairs come from: a TFDS translation dataset (including the
bundled `keras_attention_en_es`) or the user's own text files.

Every source is a `ParallelCorpus` (the protocol below): `load(split)`
returns a `tf.data.Dataset` of scalar `(source, target)` string pairs for
`split` in "train", "validation" or "test".
"""

import typing

import tensorflow as tf
import tensorflow_datasets as tfds

from keras_attention.data.bundled import KerasAttentionEnEs
from keras_attention.data.text_files import grouped_split, read_text

SPLITS = ("train", "validation", "test")


@typing.runtime_checkable
class ParallelCorpus(typing.Protocol):
    """What the recipes need from a source of sentence pairs (`TfdsCorpus`,
    `TextFilesCorpus` and `bundled_corpus()` provide it; so can your own).

    Attributes:
        name: the dataset's name, for logs and reports.
        source_language, target_language: the two sides' names.
        splits: the splits it has, a subset of `SPLITS`.
    """

    name: str
    source_language: str
    target_language: str

    @property
    def splits(self) -> tuple: ...

    def load(self, split: str) -> tf.data.Dataset:
        """The `(source, target)` scalar string pairs of `split`; a
        ValueError naming the available splits for any other."""
        ...


def _check_split(split, available):
    if split not in available:
        raise ValueError(f"Unknown split {split!r}; expected one of {list(available)}.")


class TfdsCorpus:
    """A TFDS translation dataset, e.g. `ted_hrlr_translate/pt_to_en` or
    `wmt14_translate/de-en`, read in the direction `source_language` ->
    `target_language` (default: the dataset's supervised keys).

    Args:
        name: TFDS name with its config, as for `tfds.load`.
        source_language, target_language: feature names of the two sides.
        data_dir: TFDS data directory (default: TFDS's own, ~/tensorflow_datasets).
        download: let TFDS download and prepare the data when it is missing.
        split_names: map of our split names to the dataset's, for datasets
            that call them differently (e.g. `{"validation": "dev"}`).

    Example:

    >>> corpus = TfdsCorpus("ted_hrlr_translate/pt_to_en")
    >>> pairs = corpus.load("train")   # tf.data.Dataset of (pt, en) strings
    """

    def __init__(self, name, source_language=None, target_language=None, data_dir=None,
                 download=True, split_names=None):
        try:
            builder = tfds.builder(name, data_dir=data_dir)
        except tfds.core.registered.DatasetNotFoundError as e:
            raise ValueError(f"Unknown TFDS dataset {name!r}: {e}") from None
        languages = tuple(getattr(builder.info.features, "languages", ())) or tuple(
            builder.info.features.keys()
        )
        keys = builder.info.supervised_keys or (None, None)
        source_language = source_language or keys[0]
        target_language = target_language or keys[1]
        for role, language in (("source", source_language), ("target", target_language)):
            if language not in languages:
                raise ValueError(
                    f"{name} has no {role} language {language!r}; its languages are "
                    f"{list(languages)}."
                )
        if source_language == target_language:
            raise ValueError(f"Source and target language are both {source_language!r}.")
        self.name = name
        self.source_language = source_language
        self.target_language = target_language
        self.data_dir = data_dir
        self.download = download
        self.split_names = {split: split for split in SPLITS}
        self.split_names.update(split_names or {})

    @property
    def splits(self):
        return tuple(self.split_names)

    def load(self, split, shuffle_files=False):
        """`(source, target)` scalar string pairs of `split`."""
        _check_split(split, self.split_names)
        # What `tfds.load` does, through the builder: `tfds.load` of a dataset
        # not prepared yet (the bundled corpus on first use) logs "WARNING
        # Variant folder ... has no dataset_info.json" on a healthy run.
        builder = tfds.builder(self.name, data_dir=self.data_dir)
        if self.download:
            builder.download_and_prepare()
        examples = builder.as_dataset(split=self.split_names[split], shuffle_files=shuffle_files)
        source, target = self.source_language, self.target_language
        return examples.map(lambda ex: (ex[source], ex[target]),
                            num_parallel_calls=tf.data.AUTOTUNE)

    def __repr__(self):
        return f"TfdsCorpus({self.name!r}, {self.source_language!r} -> {self.target_language!r})"


def bundled_corpus(data_dir=None):
    """The English -> Spanish corpus that ships with the package, built
    locally (no network) by TFDS on first use; see `KerasAttentionEnEs`."""
    return TfdsCorpus(KerasAttentionEnEs.name, "en", "es", data_dir=data_dir)


class TextFilesCorpus:
    """The user's own parallel text, one entry per split.

    Args:
        files: dict from split name to `(source_path, target_path)` (two
            aligned files) or a TSV path. "train" is required.
        source_language, target_language: names used in logs and reports.
        tsv_columns: the source and target columns of TSV files, counted from 0.
        holdout: `(validation, test)` sizes (fractions, or numbers of pairs) to
            split off the training file, grouped by source sentence (see
            `grouped_split`): 0 for a split that has its own files (a size
            for one is refused); `None` to use the files as given.
        split_seed: the seed of that split.

    The files are read and checked when the corpus is created, so that a
    bad file stops a run before it writes anything.

    Example:

    >>> corpus = TextFilesCorpus({"train": "spa.txt"}, "en", "es", holdout=(2000, 2000))
    >>> corpus.splits, len(corpus.texts["test"])    # ("train", "validation", "test"), ~2000
    """

    def __init__(self, files, source_language="source", target_language="target",
                 tsv_columns=(0, 1), holdout=None, split_seed=0):
        if "train" not in files:
            raise ValueError(f"Own text files need a 'train' entry; received splits {list(files)}.")
        for split in files:
            _check_split(split, SPLITS)
        self.texts = {split: read_text(paths, tsv_columns) for split, paths in files.items()}
        if holdout is not None:
            for split, size in zip(("validation", "test"), holdout):
                if size and split in files:
                    raise ValueError(f"The holdout asks for {size:g} {split} pairs from the "
                                     f"training file, but {split} files were given too; "
                                     "give 0 for that split.")
            held = grouped_split(self.texts["train"], *holdout, seed=split_seed)
            self.texts = {**held, **{s: t for s, t in self.texts.items() if s != "train"}}
        self.name = "text_files"
        self.source_language = source_language
        self.target_language = target_language

    @property
    def splits(self):
        return tuple(self.texts)

    def load(self, split):
        _check_split(split, self.texts)
        text = self.texts[split]
        return tf.data.Dataset.from_tensor_slices((list(text.sources), list(text.targets)))

    def __repr__(self):
        return f"TextFilesCorpus({ {s: t.files for s, t in self.texts.items()} })"
