"""Reading a Hugging Face checkpoint's tensors as NumPy arrays, without
PyTorch and without running code from the file.

- `model.safetensors` (and sharded `model-0000x-of-0000y.safetensors` with
  their index): the `safetensors` library's NumPy reader.
- `pytorch_model.bin` (PyTorch's zip of a pickle and raw storages): a
  restricted unpickler that admits the tensor-rebuilding calls and storage
  types and nothing else; any other global the pickle names (the way a
  pickle runs code) is refused with a message that says how to convert the
  file to safetensors. PyTorch's pre-1.6 non-zip format is refused too.
"""

import collections
import json
import os
import pickle
import zipfile

import numpy as np

SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX_FILE = "model.safetensors.index.json"
PYTORCH_FILE = "pytorch_model.bin"
_CONVERT_HINT = (
    "Convert it to safetensors where PyTorch is installed, e.g. "
    "`transformers.MarianMTModel.from_pretrained(folder).save_pretrained(folder)` "
    "(which writes model.safetensors), then load the folder again.")


def read_checkpoint(directory):
    """`(tensors, file_name)`: every tensor of the checkpoint in `directory`
    (name -> float NumPy array) and the file it came from."""
    index = os.path.join(directory, SAFETENSORS_INDEX_FILE)
    if os.path.isfile(os.path.join(directory, SAFETENSORS_FILE)):
        return read_safetensors(os.path.join(directory, SAFETENSORS_FILE)), SAFETENSORS_FILE
    if os.path.isfile(index):
        return _read_sharded_safetensors(directory, index), SAFETENSORS_INDEX_FILE
    if os.path.isfile(os.path.join(directory, PYTORCH_FILE)):
        return read_pytorch_bin(os.path.join(directory, PYTORCH_FILE)), PYTORCH_FILE
    raise FileNotFoundError(f"{directory} has no weights this package reads: expected "
                            f"{SAFETENSORS_FILE} (or a sharded one with {SAFETENSORS_INDEX_FILE}) "
                            f"or {PYTORCH_FILE}.")


def read_safetensors(path):
    """name -> NumPy array of a `.safetensors` file (bfloat16 as ml_dtypes')."""
    from safetensors.numpy import load_file

    try:
        return dict(load_file(path))
    except Exception as e:  # safetensors raises its own SafetensorError
        raise ValueError(f"{path} is not a readable safetensors file: {e}") from None


def _read_sharded_safetensors(directory, index_path):
    with open(index_path, encoding="utf-8") as f:
        weight_map = json.load(f).get("weight_map", {})
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        if os.path.basename(shard) != shard:
            raise ValueError(f"{index_path} names a shard outside its folder: {shard!r}.")
        tensors.update(read_safetensors(os.path.join(directory, shard)))
    return tensors


# PyTorch's storage classes, by the name a pickle gives them, and their dtypes.
def _bfloat16():
    import ml_dtypes

    return ml_dtypes.bfloat16


_STORAGE_DTYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
    "BFloat16Storage": _bfloat16, "LongStorage": np.int64, "IntStorage": np.int32,
    "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class _StorageType:
    def __init__(self, name):
        dtype = _STORAGE_DTYPES[name]
        self.name = name
        self.dtype = np.dtype(_bfloat16() if dtype is _bfloat16 else dtype)


def _rebuild_tensor(storage, storage_offset, size, stride, requires_grad=False,
                    backward_hooks=None, metadata=None):
    """`torch._utils._rebuild_tensor_v2`'s arguments -> a NumPy array (a copy)."""
    size, stride = tuple(size), tuple(stride)
    if len(size) != len(stride) or storage_offset < 0:
        raise pickle.UnpicklingError(f"A tensor of size {size} with stride {stride} at offset "
                                     f"{storage_offset} does not describe its storage.")
    extent = storage_offset + sum((n - 1) * s for n, s in zip(size, stride) if n) + 1
    if any(n == 0 for n in size):
        return np.zeros(size, storage.dtype)
    if extent > storage.size:
        raise pickle.UnpicklingError(f"A tensor of size {size} reads past its storage "
                                     f"({storage.size} values).")
    view = np.lib.stride_tricks.as_strided(
        storage[storage_offset:], shape=size,
        strides=[s * storage.itemsize for s in stride], writeable=False)
    return np.array(view)


class _RestrictedUnpickler(pickle.Unpickler):
    """PyTorch's state-dict pickle, with only the globals a state dict of
    tensors needs; its storages read from the zip's `data/` records."""

    def __init__(self, file, archive, prefix, path):
        super().__init__(file)
        self._archive, self._prefix, self._path = archive, prefix, path

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        raise pickle.UnpicklingError(
            f"{self._path} asks to load {module}.{name}, which a state dict of tensors never "
            f"needs: this package does not run code from a downloaded file. {_CONVERT_HINT}")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType)):
            raise pickle.UnpicklingError(f"{self._path}: unknown persistent record {pid!r}.")
        _, storage_type, key, _, numel = pid
        try:
            data = self._archive.read(f"{self._prefix}data/{key}")
        except KeyError:
            raise pickle.UnpicklingError(f"{self._path} lacks the storage {key!r}.") from None
        storage = np.frombuffer(data, dtype=storage_type.dtype)
        if storage.size < int(numel):
            raise pickle.UnpicklingError(f"{self._path}: storage {key!r} holds {storage.size} "
                                         f"values; expected {numel}.")
        return storage


def read_pytorch_bin(path):
    """name -> NumPy array of a `pytorch_model.bin` (PyTorch's zip format),
    through `_RestrictedUnpickler`; refused when it is not a plain state dict."""
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is in PyTorch's legacy (pre-1.6) format, which only a "
                         f"full unpickler reads: refused. {_CONVERT_HINT}")
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("data.pkl")]
        if len(pickles) != 1:
            raise ValueError(f"{path} is not a PyTorch checkpoint (it holds {len(pickles)} "
                             "data.pkl records; expected one).")
        prefix = pickles[0][: -len("data.pkl")]
        with archive.open(pickles[0]) as f:
            state = _RestrictedUnpickler(f, archive, prefix, path).load()
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, np.ndarray) for k, v in state.items()):
        raise ValueError(f"{path} does not hold a state dict (names to tensors).")
    return dict(state)
