"""Attention heatmaps as PNG files, drawn with matplotlib.

Figures are `matplotlib.figure.Figure` objects saved straight to files:
pyplot is not used, so importing this module leaves the user's plotting
backend (a notebook's inline one, say) as it is.

For each layer: one figure with a panel per head and a last panel with the
average over heads; rows are queries, columns keys, labelled with the
subword tokens; one colour bar for the figure (weights in [0, 1]). Panels
are sized for sentences of about 25 tokens and 8 heads.

A decoder row (a target position) is labelled "X → Y": it reads token X
(`[START]` first) and predicts token Y, as in the playground's views.
"""

import math
import os

from matplotlib.figure import Figure

from keras_attention._io import atomic_write

PANEL_INCHES = 3.6
DPI = 100


def decoder_row_labels(read_tokens, predicted_tokens):
    """The labels of decoder rows: "X → Y" for a position that reads token X
    and predicts token Y (the playground labels them the same way)."""
    return [f"{read} → {predicted}" for read, predicted in zip(read_tokens, predicted_tokens)]


def plot_attention(ax, weights, row_labels, col_labels, title=None):
    """Draws one `[rows, cols]` heatmap on `ax` and returns the image."""
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto",
                      interpolation="nearest")
    fontsize = 8 if max(len(row_labels), len(col_labels)) <= 16 else 6
    ax.set_xticks(range(len(col_labels)))
    ax.set_xticklabels(col_labels, rotation=90, fontsize=fontsize)
    ax.set_yticks(range(len(row_labels)))
    ax.set_yticklabels(row_labels, fontsize=fontsize)
    ax.tick_params(length=0)
    if title:
        ax.set_title(title, fontsize=9)
    return image


def _figure(heads, row_labels, col_labels, suptitle, xlabel, ylabel, path):
    """`heads`: `[N, rows, cols]`; draws N panels and their average."""
    panels = [(f"head {i + 1}", heads[i]) for i in range(len(heads))]
    panels.append(("average over heads", heads.mean(axis=0)))
    columns = min(len(panels), 3 if len(panels) <= 9 else 4)
    rows = math.ceil(len(panels) / columns)
    fig = Figure(figsize=(columns * PANEL_INCHES, rows * PANEL_INCHES + 0.6),
                 layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    image = None
    for ax, (title, weights) in zip(axes.flat, panels):
        image = plot_attention(ax, weights, row_labels, col_labels, title)
    for ax in axes[-1]:
        ax.set_xlabel(xlabel, fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel, fontsize=8)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6, label="attention weight")
    fig.suptitle(suptitle, fontsize=11)
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=DPI))  # never a partial PNG
    return path


def _layer_overview(maps, path, name):
    """Cross-attention averaged over heads, one panel per layer."""
    layers = maps.cross.shape[0]
    rows = decoder_row_labels(maps.target_input_tokens, maps.target_tokens)
    fig = Figure(figsize=(layers * PANEL_INCHES + 1.0, PANEL_INCHES + 0.8), layout="constrained")
    axes = fig.subplots(1, layers, squeeze=False)
    image = None
    for i, ax in enumerate(axes[0]):
        image = plot_attention(ax, maps.cross[i].mean(axis=0), rows,
                               maps.source_tokens, f"layer {i + 1}")
        ax.set_xlabel("source", fontsize=8)
    axes[0][0].set_ylabel("target: reads → predicts", fontsize=8)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="attention weight")
    fig.suptitle(f"{name}: {maps.source!r} -> {maps.translation!r}", fontsize=10)
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=DPI))
    return path


def save_attention_heatmaps(maps, directory, prefix="", layers=None):
    """Writes PNG heatmaps of an `AttentionMaps` into `directory`:

    - `<prefix>cross_attention.png`: target x source, head average, per layer;
    - `<prefix>cross_attention_layer<i>.png`: target x source, per head + average;
    - `<prefix>encoder_self_attention_layer<i>.png`: source x source;
    - `<prefix>decoder_self_attention_layer<i>.png`: target x target (causal).

    `layers`: the 1-based (decoder) layer numbers to draw per head (default:
    all); encoder layer i is drawn with decoder layer i.
    Returns the list of paths written.
    """
    count = maps.cross.shape[0]
    layers = list(range(1, count + 1)) if layers is None else list(layers)
    for layer in layers:  # before the folder is made: a refusal leaves nothing
        if not 1 <= layer <= count:
            raise ValueError(f"Layer {layer} does not exist; the model has layers 1..{count} "
                             f"(received layers {layers}).")
    os.makedirs(directory, exist_ok=True)
    written = [_layer_overview(maps, os.path.join(directory, f"{prefix}cross_attention.png"),
                               "cross-attention")]
    title = f"{maps.source!r} -> {maps.translation!r}"
    rows = decoder_row_labels(maps.target_input_tokens, maps.target_tokens)
    for layer in layers:
        i = layer - 1
        written.append(_figure(
            maps.cross[i], rows, maps.source_tokens,
            f"cross-attention, layer {layer}: {title}", "source (keys)",
            "target (queries): reads → predicts",
            os.path.join(directory, f"{prefix}cross_attention_layer{layer}.png")))
        if i < maps.encoder_self.shape[0]:
            written.append(_figure(
                maps.encoder_self[i], maps.source_tokens, maps.source_tokens,
                f"encoder self-attention, layer {layer}: {maps.source!r}", "keys", "queries",
                os.path.join(directory, f"{prefix}encoder_self_attention_layer{layer}.png")))
        written.append(_figure(
            maps.decoder_self[i], rows, maps.target_input_tokens,
            f"decoder self-attention, layer {layer}: {maps.translation!r}",
            "keys (the tokens read)", "queries: reads → predicts",
            os.path.join(directory, f"{prefix}decoder_self_attention_layer{layer}.png")))
    return written
