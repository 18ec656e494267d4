"""A translator's files: loading a preset, a run directory, an export or a
`kaggle://` / `hf://` handle (`Translator.from_preset`), and writing a preset
in keras-hub's layout (`Translator.save_to_preset`).

A preset never executes code when it is loaded (no pickle, no Lambda) and
never reads outside its folder; it appears complete or not at all.
"""

import os
import time

import keras

from keras_attention._io import (
    Layout,
    atomic_directory,
    file_inside,
    load_weights_checked,
    path_inside,
    read_json,
    recover_leftovers,
    save_weights_atomic,
    write_json,
)
from keras_attention.convert.model_card import CARD_FILE, converted_model_card
from keras_attention.data.tokenizers import load_tokenizer, load_tokenizers
from keras_attention.decoding import DecodingSettings
from keras_attention.models.precision import with_dtype_policy
from keras_attention.presets import builtin_presets, preset_path
from keras_attention.version import __version__

CONFIG_FILE = "config.json"  # keras-hub's names (keras_hub/src/utils/preset_utils.py)
MODEL_WEIGHTS_FILE = "model.weights.h5"
METADATA_FILE = "metadata.json"
TRANSLATOR_FILE = "translator.json"  # the decoding settings
# keras-hub's task, preprocessor and tokenizer configs, and the tokenizers'
# files: assets/tokenizer/source.* (source.json, source.vocab.txt, or
# source.model) and assets/target_tokenizer/target.*.
TASK_FILE, PREPROCESSOR_FILE = "task.json", "preprocessor.json"
TOKENIZER_FILES = {"source": ("tokenizer.json", "assets/tokenizer"),
                   "target": ("target_tokenizer.json", "assets/target_tokenizer")}
ASSETS_DIR = "assets"
# Presets written before the keras-hub classes: source.* and target.* in one folder.
LEGACY_TOKENIZER_DIR = "tokenizer"
# What `save_to_preset(..., overwrite=True)` may replace: a preset it wrote,
# down to the tokenizers' own files (a user's file or folder anywhere in it,
# e.g. assets/notes/, is named and nothing is replaced).
_TOKENIZER_FILE_SUFFIXES = (".json", ".vocab.txt", ".model")


def _tokenizer_folder(sides):
    return Layout("tokenizer folder", required=(), allowed=[
        side + suffix for side in sides for suffix in _TOKENIZER_FILE_SUFFIXES])


PRESET_LAYOUT = Layout(
    "Translator preset", required=(CONFIG_FILE, TRANSLATOR_FILE),
    allowed=(MODEL_WEIGHTS_FILE, METADATA_FILE, TASK_FILE, PREPROCESSOR_FILE, CARD_FILE,
             *(f for f, _ in TOKENIZER_FILES.values())),
    folders={ASSETS_DIR: Layout("assets folder", required=(), folders={
                 os.path.basename(folder): _tokenizer_folder([side])
                 for side, (_, folder) in TOKENIZER_FILES.items()}),
             LEGACY_TOKENIZER_DIR: _tokenizer_folder(["source", "target"])})
PRESET_TEMP_PREFIX = ".preset-"  # its temporary folders, next to it
REMOTE_SCHEMES = ("kaggle", "hf")  # loaded by keras-hub's `Seq2SeqLM.from_preset`
_RUN_METRICS = ("bleu", "sacrebleu_signature", "chrf", "chrf_signature", "eval_split",
                "eval_sentences", "exact_match", "steps", "validation_bleu",
                "reliability")  # the rule calibrated on the run's held-out split
# The module `translator.json` names: where users import the class from (the
# file it was written by before the translator became a package).
_PUBLIC_MODULE = "keras_attention.translation"


def load_translator(cls, preset, dtype=None, **overrides):
    """`cls.from_preset(preset, dtype, **overrides)` (see there)."""
    if not isinstance(preset, (str, os.PathLike)):
        raise TypeError(f"`preset` must be a path or a handle string; received {preset!r}.")
    preset = preset_path(os.fspath(preset))  # a shipped preset's name: its folder
    if "://" in preset:
        translator = _from_remote_preset(cls, preset)
    elif not os.path.isdir(preset) and not _restored(preset):
        raise FileNotFoundError(
            f"{preset!r} is not a directory: expected a preset directory (written by "
            "Translator.save_to_preset), a run directory of recipes/translation/train.py, "
            "an exported SavedModel folder, a kaggle:// or hf:// handle, or the name of a "
            f"shipped preset ({', '.join(sorted(builtin_presets())) or 'none installed'}).")
    else:
        translator = _from_local_directory(cls, preset)
    if dtype is None:  # a preset's config.json has no mixed policy (TransformerBackbone)
        dtype = translator.metadata.get("dtype_policy")
    if dtype is not None and keras.dtype_policies.get(dtype).name != (
            translator.model.dtype_policy.name):
        translator = cls(with_dtype_policy(translator.model, dtype),
                         translator.source_tokenizer, translator.target_tokenizer,
                         **translator.settings.to_dict(), metadata=translator.metadata)
    return translator.with_settings(**overrides)


def save_translator(translator, preset_dir, overwrite=False):
    """`translator.save_to_preset(preset_dir, overwrite)` (see there)."""
    import keras_hub

    task = translator.as_keras_hub_task()
    preset_dir = os.fspath(preset_dir)
    with atomic_directory(preset_dir, PRESET_TEMP_PREFIX, overwrite, PRESET_LAYOUT) as tmp:
        # keras-hub's files, as its own saver writes them (its configs
        # without compile and build configs); the weights by the write
        # that checks the room first (h5py crashes on a full disk).
        write_json(os.path.join(tmp, CONFIG_FILE), _serialized(task.backbone))
        save_weights_atomic(task.backbone, os.path.join(tmp, MODEL_WEIGHTS_FILE),
                            "preset's weights file")
        write_json(os.path.join(tmp, TASK_FILE), _serialized(task))
        task.preprocessor.save_to_preset(tmp)  # preprocessor.json, tokenizers, assets/
        cls = type(translator)
        module = (_PUBLIC_MODULE if cls.__module__.startswith(_PUBLIC_MODULE + ".")
                  else cls.__module__)
        write_json(os.path.join(tmp, TRANSLATOR_FILE), {
            "module": module, "class_name": cls.__name__, "config": translator.get_config()})
        write_json(os.path.join(tmp, METADATA_FILE), {
            **translator.metadata,
            "keras_attention_version": __version__,
            "keras_version": keras.version(),
            "keras_hub_version": keras_hub.__version__,
            "tasks": ["Seq2SeqLM"],
            "parameter_count": task.backbone.count_params(),
            # The policy it computes in: config.json saves a mixed policy
            # as its variables' dtype, for keras-hub (TransformerBackbone).
            "dtype_policy": translator.model.dtype_policy.name,
            "date_saved": time.strftime("%Y-%m-%d@%H:%M:%S"),
        })
        if "converted_from" in translator.metadata:  # the original's licence and credit
            with open(os.path.join(tmp, CARD_FILE), "w", encoding="utf-8") as f:
                f.write(converted_model_card(
                    translator.metadata, os.path.basename(os.path.abspath(preset_dir)),
                    translator.source_tokenizer.vocabulary_size,
                    translator.target_tokenizer.vocabulary_size,
                    task.backbone.count_params(),
                    {"beam_size": translator.beam_size,
                     "length_penalty": translator.length_penalty}))
    return preset_dir


def _restored(preset_dir):
    """Whether `preset_dir`, missing, was just restored from what a
    `save_to_preset` killed between its two renames left next to it."""
    try:
        recover_leftovers(preset_dir, PRESET_TEMP_PREFIX)
    except OSError:  # e.g. a read-only folder: nothing restored
        return False
    return os.path.isdir(preset_dir)


def _serialized(obj):
    """`keras.saving.serialize_keras_object(obj)` without compile and build
    configs, at every depth (keras-hub's preset saver drops them too)."""
    def drop(config):
        if isinstance(config, dict):
            return {k: drop(v) for k, v in config.items()
                    if k not in ("compile_config", "build_config")}
        if isinstance(config, list):
            return [drop(v) for v in config]
        return config

    return drop(keras.saving.serialize_keras_object(obj))


def _missing(directory, kind, names):
    """Raises FileNotFoundError when `directory` lacks any of `names`."""
    absent = [n for n in names if not os.path.exists(os.path.join(directory, n))]
    if absent:
        raise FileNotFoundError(f"{directory} looks like {kind} but has no "
                                f"{' and no '.join(absent)}.")


def _from_local_directory(cls, directory):
    """A preset, a run or an export, told apart by their files."""
    extra = os.path.join(directory, "assets.extra")
    if os.path.isdir(extra):  # an export's version folder
        directory = extra
    if os.path.isfile(os.path.join(directory, "export.json")):
        _missing(directory, "an exported SavedModel's assets.extra/", ("model.keras", "vocab"))
        export_path = os.path.join(directory, "export.json")
        export = read_json(export_path)
        model = keras.saving.load_model(os.path.join(directory, "model.keras"))
        settings = DecodingSettings.from_dict(
            {k: export[k] for k in DecodingSettings.names() if k in export}, export_path)
        if settings.max_output_length == model.max_length:  # the export resolved None
            settings = settings.replace(max_output_length=None)
        return cls(model, *load_tokenizers(os.path.join(directory, "vocab")),
                   **settings.to_dict(), metadata={"export": export})
    config_path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(config_path):
        raise FileNotFoundError(
            f"{directory} has no {CONFIG_FILE}: it is neither a preset directory "
            f"({CONFIG_FILE}, {MODEL_WEIGHTS_FILE}, {ASSETS_DIR}/), a run directory "
            "(config.json, model.keras, vocab/) nor an export (assets.extra/export.json).")
    config = read_json(path_inside(directory, CONFIG_FILE))
    from keras_attention.convert import marian_folder  # the one recogniser of the family

    if marian_folder(directory) is not None:  # Hugging Face's layout of an OPUS-MT model
        return _from_marian_folder(cls, directory)
    if "class_name" in config:  # a preset: a serialized model
        _missing(directory, "a preset directory", (MODEL_WEIGHTS_FILE,))
        # Every file it reads, inside it (a link out of it is refused).
        return _from_preset_files(cls, lambda name: path_inside(directory, name))
    _missing(directory, "a run directory", ("model.keras", "vocab"))
    metadata = {"training_config": config}
    metrics_path = os.path.join(directory, "metrics.json")
    if os.path.isfile(metrics_path):
        metrics = read_json(metrics_path)
        metadata.update({k: metrics[k] for k in _RUN_METRICS if k in metrics})
    # The run's decoding settings (the training config names them as the
    # flags do; a run of an earlier version has only some of them).
    settings = DecodingSettings.from_dict(
        {k: config[k] for k in DecodingSettings.names() if k in config}, config_path)
    return cls(keras.saving.load_model(os.path.join(directory, "model.keras")),
               *load_tokenizers(os.path.join(directory, "vocab")), **settings.to_dict(),
               metadata=metadata)


def _from_marian_folder(cls, directory):
    """A Hugging Face Marian (OPUS-MT) model, converted (`keras_attention.convert`)."""
    from keras_attention.convert import load_marian

    model, source, target, settings, metadata = load_marian(directory)
    return cls(model, source, target, **settings, metadata=metadata)


def _from_preset_files(cls, get_file):
    """A translator from a preset's files; `get_file(name)` -> a local path."""
    from keras_attention.models import Transformer

    config_path = get_file(CONFIG_FILE)
    config = read_json(config_path, "a preset's model config")
    if "TransformerBackbone" in str(config.get("registered_name")):
        # keras-hub's class, which `import keras_attention` registers on the
        # TensorFlow backend only (it keeps JAX's import free of TensorFlow;
        # a translator needs TensorFlow anyway).
        import keras_attention.hub  # noqa: F401
    try:
        model = keras.saving.deserialize_keras_object(config)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise ValueError(f"{config_path} does not describe a model this package can build "
                         f"({type(e).__name__}: {e}).") from None
    if not isinstance(model, Transformer):
        raise ValueError(f"{config_path} describes a {type(model).__name__}, not a "
                         "keras_attention Transformer: it is not a Translator preset.")
    load_weights_checked(model, get_file(MODEL_WEIGHTS_FILE), "preset's weights file")
    tokenizers = [_preset_tokenizer(get_file, side) for side in ("source", "target")]
    settings_path = get_file(TRANSLATOR_FILE)
    settings = read_json(settings_path, "a preset's decoding settings")
    if not isinstance(settings, dict) or not isinstance(settings.get("config"), dict):
        raise ValueError(f"{settings_path} holds no decoding settings (expected "
                         '{"config": {"beam_size": ..., ...}}).')
    settings = DecodingSettings.from_dict(settings["config"], settings_path)
    metadata = read_json(get_file(METADATA_FILE), "a preset's metadata")
    return cls(model, *tokenizers, **settings.to_dict(), metadata=metadata)


def _preset_tokenizer(get_file, side):
    """The `side` ("source" or "target") tokenizer of a preset: keras-hub's
    assets folder, or the `tokenizer/` folder of a preset written before."""
    folders = (TOKENIZER_FILES[side][1], LEGACY_TOKENIZER_DIR)
    for folder in folders:
        try:
            config_path = get_file(f"{folder}/{side}.json")
        except FileNotFoundError:
            continue
        if os.path.isfile(config_path):
            break
    else:
        raise FileNotFoundError(
            f"The preset has no tokenizer for the {side} side: no "
            f"{folders[0]}/{side}.json (nor {folders[1]}/{side}.json, the place of "
            "presets written by earlier versions).")
    tokenizer_config = read_json(config_path, "a preset's tokenizer config")
    for key in ("vocabulary_file", "model_file"):
        if key in tokenizer_config:
            # A file name inside the tokenizer's folder (checked before
            # anything is downloaded), then downloaded.
            file_inside(os.path.dirname(config_path), side, tokenizer_config, key)
            get_file(f"{folder}/{tokenizer_config[key]}")
    return load_tokenizer(os.path.dirname(config_path), side)


def _from_remote_preset(cls, handle):
    """A `kaggle://` or `hf://` preset, loaded by keras-hub's own
    `Seq2SeqLM.from_preset` (its public API); its `metadata.json` downloaded
    by the hub's own client, as keras-hub downloads the rest."""
    scheme = handle.split("://")[0].lower()
    if scheme not in REMOTE_SCHEMES:
        raise ValueError(f"Unknown preset handle scheme {scheme!r} in {handle!r}; expected a "
                         "local directory or a kaggle://... or hf://... handle.")
    if scheme == "hf":
        from keras_attention.convert import marian_folder

        marian = marian_folder(handle)
        if marian is not None:
            return _from_marian_folder(cls, marian)
    try:
        import keras_hub
    except ImportError:
        raise ImportError(f"Loading {handle!r} needs keras-hub (pip install keras-hub), "
                          "which downloads presets from Kaggle and Hugging Face.") from None
    try:
        task = keras_hub.models.Seq2SeqLM.from_preset(handle)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"The preset {handle!r} is not a complete Translator preset "
                                f"(written by Translator.save_to_preset): {e}") from None
    metadata_path = _hub_file(handle, METADATA_FILE)
    metadata = read_json(metadata_path, "a preset's metadata") if metadata_path else {}
    return cls.from_keras_hub_task(task, metadata=metadata)


def _hub_file(handle, name):
    """The local path of file `name` of a `kaggle://` or `hf://` preset, through
    the hub's own client (`huggingface_hub`, `kagglehub`: keras-hub's, and
    installed with it), or None when the preset has no such file."""
    scheme, path = handle.split("://", 1)
    if scheme.lower() == "hf":
        import huggingface_hub

        try:
            return huggingface_hub.hf_hub_download(repo_id=path, filename=name)
        except huggingface_hub.utils.EntryNotFoundError:
            return None
    import kagglehub

    try:
        return kagglehub.model_download(path, name)
    except kagglehub.exceptions.KaggleApiHTTPError as e:
        if "404" in str(e):
            return None
        raise
    except ValueError as e:  # kagglehub: "... is not present in the model files"
        if "not present" in str(e):
            return None
        raise
