"""Reading transformers' TensorFlow checkpoint (`tf_model.h5`, what
`TFMarianMTModel.save_pretrained` writes) as NumPy arrays named as its
PyTorch state dict, without TensorFlow and treating the file as untrusted.

The layout is Keras 2's `save_weights` HDF5 file: the root's `layer_names`
attribute lists the top-level layers (`model`, `final_logits_bias`), each a
group whose `weight_names` attribute lists its weights' paths inside it
(`tf_marian_mt_model/model/encoder/layers.0/self_attn/k_proj/kernel:0`,
`model.shared/model.shared/embeddings:0`). A name becomes the PyTorch one as
transformers' own TF -> PyTorch loading makes it: without `:0` and the
model's scope, its parts joined by dots, `kernel`, `gamma` and `embeddings`
named `weight`, `beta` `bias`; a 2-D `kernel` is transposed (Keras' Dense
keeps `(in, out)`, PyTorch's Linear `(out, in)`).

Before any value is read, every object a name reaches is checked: each
link on its path a hard link (a soft link or an external link, which
would read another file, is refused), the object a dataset, not virtual
(a view of other files), not stored in external files, of a floating dtype,
with a shape; the datasets together hold no
more bytes than the file (a compressed dataset that would decompress past
it is refused before it is). Whatever else HDF5 finds wrong with the file
(truncated, not HDF5) is a ValueError naming it too.
"""

import math
import os

import numpy as np

HDF5_FILE = "tf_model.h5"
HDF5_INDEX_FILE = "tf_model.h5.index.json"
_MAX_NAMES = 100_000  # weights of one layer group (a Marian model has a few hundred)
_MAX_NAME_LENGTH = 1000
# Keras' weight names -> PyTorch's (transformers' TF -> PyTorch mapping).
_LEAVES = {"kernel": "weight", "gamma": "weight", "embeddings": "weight", "beta": "bias",
           "bias": "bias", "weight": "weight"}
# The Keras scope of the whole model, which PyTorch's names do not have.
_MODEL_SCOPES = ("tf_marian_mt_model",)


class _Refused(ValueError):
    pass


def _strings(value, path, what):
    """An HDF5 attribute that must be a list of strings (bytes or str)."""
    try:
        items = list(np.asarray(value).reshape(-1))
    except Exception:  # (a malformed attribute: h5py/NumPy raise their own)
        items = None
    if items is None or len(items) > _MAX_NAMES:
        raise _Refused(f"{path}: {what} is not a list of at most {_MAX_NAMES} names.")
    names = []
    for item in items:
        if isinstance(item, bytes):
            try:
                item = item.decode("utf-8")
            except UnicodeDecodeError:
                item = None
        if not isinstance(item, str) or not 0 < len(item) <= _MAX_NAME_LENGTH:
            raise _Refused(f"{path}: {what} holds an entry that is not a name "
                           f"(a {type(item).__name__}).")
        names.append(item)
    return names


def _hard_object(group, name, path):
    """The object `name` (a `/`-separated path) names under `group`, every
    link on the way a hard link (never a soft or external one)."""
    import h5py

    node = group
    for part in name.split("/"):
        if part in ("", ".", "..") or not isinstance(node, h5py.Group):
            raise _Refused(f"{path}: the weight name {name[:200]!r} is not a path of "
                           "datasets in the file.")
        link = node.get(part, getlink=True)
        if link is None:
            raise _Refused(f"{path} lacks the weight {name[:200]!r} its layer lists.")
        if not isinstance(link, h5py.HardLink):
            kind = "an external link (to another file)" if isinstance(
                link, h5py.ExternalLink) else "a soft link"
            raise _Refused(f"{path}: {name[:200]!r} is reached through {kind}, which a "
                           "checkpoint never needs: refused.")
        node = node[part]
    return node


def _checked_dataset(node, name, path):
    import h5py

    if not isinstance(node, h5py.Dataset):
        raise _Refused(f"{path}: the weight {name[:200]!r} is not a dataset.")
    if node.is_virtual:
        raise _Refused(f"{path}: the weight {name[:200]!r} is a virtual dataset (a view of "
                       "other files): refused.")
    if node.external:
        raise _Refused(f"{path}: the weight {name[:200]!r} is stored in external files: "
                       "refused.")
    dtype = node.dtype
    if dtype.kind != "f" or dtype.itemsize not in (2, 4, 8):
        raise _Refused(f"{path}: the weight {name[:200]!r} has dtype {dtype}; expected "
                       "float16, float32 or float64.")
    if node.shape is None:  # (HDF5 itself allows at most 32 dimensions)
        raise _Refused(f"{path}: the weight {name[:200]!r} has no shape (an empty "
                       "dataspace).")
    return node


def torch_name(weight_name):
    """transformers' PyTorch name of a Keras weight name of its TF model
    (`tf_marian_mt_model/model/encoder/layers.0/fc1/kernel:0` ->
    `model.encoder.layers.0.fc1.weight`), and whether to transpose it."""
    name = weight_name[:-2] if weight_name.endswith(":0") else weight_name
    parts = [p for p in name.split("/") if p]
    if parts and parts[0] in _MODEL_SCOPES:
        parts = parts[1:]
    # A layer made inside its own name scope repeats it (`model.shared/model.shared`).
    parts = [p for i, p in enumerate(parts) if i == 0 or p != parts[i - 1]]
    if not parts:
        return "", False
    leaf = parts[-1]
    transpose = leaf == "kernel"
    if leaf in _LEAVES and len(parts) > 1:
        parts[-1] = _LEAVES[leaf]
    return ".".join(parts), transpose


def read_tf_h5(path):
    """name -> NumPy array (PyTorch names and layout) of transformers' Keras
    `tf_model.h5`; a file that does not describe its own weights (see the
    module's docstring) is a ValueError naming it."""
    import h5py

    try:
        with h5py.File(path, "r") as f:
            return _read(f, path, h5py)
    except _Refused:
        raise
    except Exception as e:  # h5py raises OSError, KeyError, TypeError, ... on bad files
        text = str(e)
        raise ValueError(f"{path} is not a readable Keras HDF5 weights file "
                         f"({type(e).__name__}: {text[:200]}).") from None


def _read(f, path, h5py):
    size = os.path.getsize(path)
    if "layer_names" not in f.attrs:
        raise _Refused(f"{path} is not a Keras weights file: its root has no layer_names.")
    datasets = {}
    for layer in _strings(f.attrs["layer_names"], path, "the root's layer_names"):
        group = _hard_object(f, layer, path)
        if not isinstance(group, h5py.Group) or "weight_names" not in group.attrs:
            raise _Refused(f"{path}: layer {layer[:200]!r} is not a group with weight_names.")
        for weight in _strings(group.attrs["weight_names"], path,
                               f"layer {layer[:200]!r}'s weight_names"):
            name, transpose = torch_name(weight)
            if not name or name in datasets:
                raise _Refused(f"{path}: the weight {weight[:200]!r} has no name of its own "
                               f"(it reads as {name[:200]!r}).")
            node = _checked_dataset(_hard_object(group, weight, path), weight, path)
            datasets[name] = (node, transpose)
    total = sum(math.prod(node.shape) * node.dtype.itemsize for node, _ in datasets.values())
    if total > size:
        raise _Refused(f"{path}'s weights would hold {total} bytes, more than the file "
                       f"({size}): it is not a weights file this package reads.")
    tensors = {}
    for name, (node, transpose) in datasets.items():
        array = np.asarray(node[()]).astype(node.dtype.newbyteorder("="), copy=False)
        tensors[name] = array.T.copy() if transpose and array.ndim == 2 else array
    return tensors
