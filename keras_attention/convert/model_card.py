"""The licence and attribution of a converted model, and the model card
(`README.md`, in Hugging Face / keras-hub card style) that a converted
translator's `save_to_preset` writes with them.

A Hugging Face repository states its licence in its `README.md`'s front
matter (`license: cc-by-4.0`, between two `---` lines); OPUS-MT's models
carry Helsinki-NLP's. `card_of_folder` reads it (and `license_name`,
`license_link`, for `license: other`) with the repository's name; a
converted preset's card repeats them, so that the licence and the
attribution travel with the weights.
"""

import os
import re

CARD_FILE = "README.md"
MAX_CARD_BYTES = 1 << 20  # a model card is text: read no more of an untrusted file
# Hugging Face's snapshot folders: .../models--<owner>--<name>/snapshots/<revision>
_SNAPSHOT = re.compile(r"models--(?P<owner>[^/\\]+?)--(?P<name>[^/\\]+)[/\\]snapshots[/\\]")
_FIELD = re.compile(r"^(license|license_name|license_link)\s*:\s*(.*?)\s*$")


def front_matter_fields(text):
    """The `license`, `license_name` and `license_link` of a card's YAML
    front matter (plain scalars, quotes removed), `{}` when it has none."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    fields = {}
    for line in lines[1:]:
        if line.strip() == "---":
            return fields
        match = _FIELD.match(line)
        if match and match.group(2):
            fields[match.group(1)] = match.group(2).strip("'\"")
    return {}  # no closing line: not front matter


def repository_of(directory, name_or_path=None):
    """`owner/name` of the Hub repository a folder came from: its snapshot
    folder's name in Hugging Face's cache, else `name_or_path` (config.json's
    `_name_or_path`) when it reads `owner/name`, else None."""
    match = _SNAPSHOT.search(os.path.abspath(directory) + os.sep)
    if match:
        return f"{match.group('owner')}/{match.group('name')}"
    if name_or_path and re.fullmatch(r"[\w.-]+/[\w.-]+", name_or_path):
        return name_or_path
    return None


def card_of_folder(directory, name_or_path=None):
    """`{"license": ..., "license_name": ..., "license_link": ...,
    "repository": ...}` of a Hugging Face folder (the keys it has): the
    licence from its README.md's front matter, the repository from
    `repository_of`."""
    card = {}
    path = os.path.join(directory, CARD_FILE)
    if os.path.isfile(path):
        with open(path, "rb") as f:
            text = f.read(MAX_CARD_BYTES).decode("utf-8", errors="replace")
        card.update(front_matter_fields(text))
    repository = repository_of(directory, name_or_path)
    if repository:
        card["repository"] = repository
    return card


def converted_model_card(metadata, name, source_vocabulary, target_vocabulary, parameters,
                         settings):
    """The README.md of a converted translator's preset: front matter with
    the original's licence (`other` when unknown), its attribution (the
    repository and its owner), what the conversion did, and how to load it.
    `metadata`: the translator's, with `converted_from` (`load_marian`'s)."""
    source = metadata["converted_from"]
    licence = source.get("license") or "other"
    repository = source.get("repository")
    origin = (f"[{repository}](https://huggingface.co/{repository})" if repository
              else f"the Hugging Face folder `{source.get('name_or_path') or 'unnamed'}`")
    owner = repository.split("/")[0] if repository else "its authors"
    languages = source.get("languages")
    front = ["---", f"license: {licence}"]
    front += [f"{k}: {source[k]}" for k in ("license_name", "license_link") if source.get(k)]
    front += [f"language: [{', '.join(languages)}]"] if languages else []
    front += [f"base_model: {repository}"] if repository else []
    front += ["library_name: keras-hub", "pipeline_tag: translation",
              "tags: [keras, keras-hub, keras_attention, translation, marian, opus-mt]", "---"]
    stated = (f"**{licence}**, the licence {origin} states" if source.get("license")
              else f"the original's licence (its card states none: see {origin})")
    return "\n".join(front) + f"""

# {name}

{origin}, by {owner}, converted by keras_attention
({source.get('format', 'Hugging Face Marian')}, weights from `{source.get('weights_file')}`)
into a keras-hub preset: the same weights and vocabularies, every logit the original's.

## Licence and attribution

The weights and vocabularies are {owner}'s work, distributed under {stated};
this converted copy is under the same licence. Credit {owner} and link
{origin} when you use or share it. OPUS-MT models are trained on the OPUS
corpora (Tiedemann and Thottingal, "OPUS-MT — Building open translation
services for the World", EAMT 2020).

## Model

A Marian encoder-decoder Transformer, {parameters:,} parameters; vocabularies of
{source_vocabulary:,} (source) and {target_vocabulary:,} (target) tokens. Decoding: beam
search, {settings['beam_size']} beams, length penalty |Y|^{settings['length_penalty']}
(transformers' form).

```python
from keras_attention import Translator

translator = Translator.from_preset("path/to/this/folder")
translator.translate(["..."])
```
"""
