"""A translator's attention as files: PNG heatmaps named after their
sentences (never overwritten) and the playground's views as self-contained
HTML pages."""

import os
import re

from keras_attention._io import atomic_write_text
from keras_attention.visualization import save_attention_heatmaps


def heatmap_prefix(sentence, output_dir):
    """A file-name prefix made of the sentence's first words ("the_red_book_"),
    numbered ("the_red_book_2_") when `output_dir` holds heatmaps with it
    already: heatmaps are never overwritten."""
    stem = "_".join(re.findall(r"\w+", sentence.lower()))[:40].strip("_") or "sentence"
    prefix, number = f"{stem}_", 1
    # Every set of heatmaps has `<prefix>cross_attention.png`; no other
    # prefix can produce that name.
    while os.path.exists(os.path.join(output_dir, f"{prefix}cross_attention.png")):
        number += 1
        prefix = f"{stem}_{number}_"
    return prefix


def visualize(translator, sentences, output_dir, target=None, layers=None):
    """Attention heatmaps (PNG) for each sentence, translated with the
    `translator`'s settings (or teacher-forced on `target`), named after the
    sentence (`heatmap_prefix`), never overwriting files. Returns the paths
    written. A layer number the model does not have is refused before
    anything is translated or written."""
    count = translator.model.num_decoder_layers
    if layers is not None and not all(1 <= layer <= count for layer in layers):
        raise ValueError(f"--layers {' '.join(map(str, layers))}: the model has layers "
                         f"1..{count}; give numbers in that range.")
    paths = []
    for sentence in sentences:
        maps = translator.attention(sentence, target)
        paths += save_attention_heatmaps(maps, output_dir, layers=layers,
                                         prefix=heatmap_prefix(sentence, output_dir))
    return paths


def write_html(translator, sentences, path, target=None):
    """The playground's views of each sentence as a self-contained HTML page
    (`keras_attention.playground.attention_html`): `path` for one sentence,
    `<stem>_1.html`, `<stem>_2.html`, ... for several. Returns the paths."""
    from keras_attention.playground import attention_html

    stem, ext = os.path.splitext(path)
    paths = [path] if len(sentences) == 1 else [
        f"{stem}_{i}{ext or '.html'}" for i in range(1, len(sentences) + 1)]
    pages = [attention_html(translator, s, target=target) for s in sentences]  # all, then write
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    for page_path, page in zip(paths, pages):
        atomic_write_text(page_path, page)
    return paths
