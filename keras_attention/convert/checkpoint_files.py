"""Reading a Hugging Face checkpoint's tensors as NumPy arrays, without
PyTorch and without running code from the file.

Every reader treats its file as untrusted: whatever the file says (a
header, a pickle's offsets, sizes and strides, an index), a file that does
not describe its own bytes is a ValueError naming it, before any memory is
read or allocated on its word, and what is read stays bounded by the file's
size.

- `model.safetensors` (and sharded `model-0000x-of-0000y.safetensors` with
  their index): the `safetensors` library's NumPy reader (which checks every
  header against the bytes); the index's names are checked here.
- `pytorch_model.bin` (PyTorch's zip of a pickle and raw storages): the
  pickle's opcodes are read first (`pickletools`) and only those that build
  data, name a global, call it or refer to a storage are admitted; then a
  restricted unpickler admits the tensor-rebuilding calls and storage types
  and nothing else (any other global, the way a pickle runs code, is refused
  with a message that says how to convert the file to safetensors); each
  tensor's offset, size and strides are checked against its storage, and the
  tensors together may not hold more bytes than the storages they read.
  PyTorch's pre-1.6 non-zip format is refused too.
- `tf_model.h5` (transformers' TensorFlow weights, Keras' HDF5 layout), when
  there is neither: `hdf5_checkpoint`, which refuses links to other files,
  virtual and external datasets and sizes past the file's.
"""

import collections
import io
import json
import math
import os
import pickle
import pickletools
import zipfile

import numpy as np

from keras_attention.convert.hdf5_checkpoint import (  # noqa: F401 (the readers' one door)
    HDF5_FILE,
    HDF5_INDEX_FILE,
    read_tf_h5,
)

SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX_FILE = "model.safetensors.index.json"
PYTORCH_FILE = "pytorch_model.bin"
_CONVERT_HINT = (
    "Convert it to safetensors where PyTorch is installed, e.g. "
    "`transformers.MarianMTModel.from_pretrained(folder).save_pretrained(folder)` "
    "(which writes model.safetensors), then load the folder again.")
# The dtypes a checkpoint's weights may have (bfloat16: ml_dtypes').
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


class _Refused(ValueError):
    """A refusal whose message already names the file and the defect."""


def read_checkpoint(directory):
    """`(tensors, file_name)`: every tensor of the checkpoint in `directory`
    (name -> NumPy array) and the file it came from."""
    index = os.path.join(directory, SAFETENSORS_INDEX_FILE)
    if os.path.isfile(os.path.join(directory, SAFETENSORS_FILE)):
        return read_safetensors(os.path.join(directory, SAFETENSORS_FILE)), SAFETENSORS_FILE
    if os.path.isfile(index):
        return _read_sharded_safetensors(directory, index), SAFETENSORS_INDEX_FILE
    if os.path.isfile(os.path.join(directory, PYTORCH_FILE)):
        return read_pytorch_bin(os.path.join(directory, PYTORCH_FILE)), PYTORCH_FILE
    if os.path.isfile(os.path.join(directory, HDF5_FILE)):
        return read_tf_h5(os.path.join(directory, HDF5_FILE)), HDF5_FILE
    sharded = (f" ({HDF5_INDEX_FILE}: sharded TensorFlow weights are not read; convert them "
               "to safetensors)" if os.path.isfile(os.path.join(directory, HDF5_INDEX_FILE))
               else "")
    raise FileNotFoundError(f"{directory} has no weights this package reads{sharded}: expected "
                            f"{SAFETENSORS_FILE} (or a sharded one with {SAFETENSORS_INDEX_FILE}), "
                            f"{PYTORCH_FILE} or {HDF5_FILE}.")


def _describe(error):
    """A short description of an exception a malformed file raised."""
    text = str(error)
    return f"{type(error).__name__}: {text[:200]}{' ...' if len(text) > 200 else ''}"


def read_safetensors(path):
    """name -> NumPy array of a `.safetensors` file (bfloat16 as ml_dtypes')."""
    from safetensors.numpy import load_file

    try:
        return dict(load_file(path))
    except Exception as e:  # safetensors raises its own SafetensorError, NumPy its own
        raise ValueError(f"{path} is not a readable safetensors file ({_describe(e)}).") from None


def _read_sharded_safetensors(directory, index_path):
    try:
        with open(index_path, encoding="utf-8") as f:
            index = json.load(f)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{index_path} is not valid JSON ({_describe(e)}).") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()):
        raise ValueError(f"{index_path} has no weight_map (tensor names to shard file names).")
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        if (os.path.basename(shard) != shard or shard in (".", "..")
                or not shard.endswith(".safetensors")):
            raise ValueError(f"{index_path} names a shard that is not a .safetensors file "
                             f"of its folder: {shard[:200]!r}.")
        path = os.path.join(directory, shard)
        if not os.path.isfile(path):
            raise ValueError(f"{index_path} names the shard {shard!r}, which its folder lacks.")
        listed = {name for name, file in weight_map.items() if file == shard}
        held = read_safetensors(path)
        if set(held) != listed:
            names = sorted(set(held) ^ listed)
            raise ValueError(f"{path} does not hold the tensors {index_path} lists for it "
                             f"(these differ: {', '.join(names[:8])}).")
        tensors.update(held)
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
# The opcodes of a state dict's pickle: data, memo, the allowed globals, the
# calls of them (REDUCE; BUILD only reaches the objects below, which refuse
# it but for a state dict's `_metadata`) and storage references. No INST,
# OBJ, NEWOBJ, EXT (other ways to call or name a global), no buffers.
_OPCODES = frozenset(
    "PROTO FRAME STOP MARK POP POP_MARK DUP PUT BINPUT LONG_BINPUT MEMOIZE GET BINGET "
    "LONG_BINGET NONE NEWTRUE NEWFALSE INT BININT BININT1 BININT2 LONG LONG1 LONG4 FLOAT "
    "BINFLOAT STRING BINSTRING SHORT_BINSTRING UNICODE BINUNICODE SHORT_BINUNICODE "
    "BINUNICODE8 BINBYTES SHORT_BINBYTES BINBYTES8 EMPTY_DICT DICT SETITEM SETITEMS "
    "EMPTY_LIST LIST APPEND APPENDS EMPTY_TUPLE TUPLE TUPLE1 TUPLE2 TUPLE3 GLOBAL "
    "STACK_GLOBAL REDUCE BUILD PERSID BINPERSID".split())
_MAX_DIMENSIONS = 32  # NumPy's limit is 64; no weight has more than a few


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


class _NoState:
    """Refuses BUILD (`__setstate__`): only a state dict takes a state."""

    __slots__ = ()

    def __setstate__(self, state):
        raise pickle.UnpicklingError("A pickle sets the state of a storage type or a "
                                     "tensor-rebuilding call, which a state dict never does.")


class _StorageType(_NoState):
    __slots__ = ("name", "dtype")

    def __init__(self, name):
        dtype = _STORAGE_DTYPES[name]
        self.name = name
        self.dtype = np.dtype(_bfloat16() if dtype is _bfloat16 else dtype)


class _Call(_NoState):
    """An admitted callable of the pickle (what its GLOBAL names)."""

    __slots__ = ("function",)

    def __init__(self, function):
        self.function = function

    def __call__(self, *args):
        return self.function(*args)


class _StateDict(collections.OrderedDict):
    """PyTorch's state dict: an OrderedDict whose only state is `_metadata`."""

    def __setstate__(self, state):
        if not isinstance(state, dict) or not set(state) <= {"_metadata"}:
            raise pickle.UnpicklingError("A pickle sets attributes of a state dict other "
                                         "than its `_metadata`.")


class _Storage:
    __slots__ = ("key", "array")

    def __init__(self, key, array):
        self.key, self.array = key, array


class _Tensor(_NoState):
    """A checked view of a storage, made into an array once every tensor is
    known (`_materialize`)."""

    __slots__ = ("storage", "offset", "size", "stride")

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride

    @property
    def identity(self):
        return (self.storage.key, self.offset, self.size, self.stride)

    @property
    def nbytes(self):
        return math.prod(self.size) * self.storage.array.itemsize

    def array(self):
        if not math.prod(self.size):
            return np.zeros(self.size, self.storage.array.dtype)
        itemsize = self.storage.array.itemsize
        view = np.lib.stride_tricks.as_strided(
            self.storage.array[self.offset:], shape=self.size,
            strides=[s * itemsize for s in self.stride], writeable=False)
        return np.array(view)


class _RestrictedUnpickler(pickle.Unpickler):
    """PyTorch's state-dict pickle, with only the globals a state dict of
    tensors needs; its storages read from the zip's `data/` records
    (`read_record(name)` -> bytes, bounded by the file's size)."""

    def __init__(self, file, read_record, prefix, path):
        super().__init__(file)
        self._read_record, self._prefix, self._path = read_record, prefix, path
        self._storages = {}

    @property
    def storage_bytes(self):
        """The bytes of the storages read so far."""
        return sum(s.array.nbytes for s in self._storages.values())

    def _refuse(self, message):
        return _Refused(f"{self._path} {message}")

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return _Call(_StateDict)
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _Call(self._rebuild_tensor)
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        raise self._refuse(
            f"asks to load {module[:100]}.{name[:100]}, which a state dict of tensors never "
            f"needs: this package does not run code from a downloaded file. {_CONVERT_HINT}")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str)
                and _is_int(pid[4]) and pid[4] >= 0):
            raise self._refuse(f"holds a persistent record that is not a storage "
                               f"(a {type(pid).__name__}).")
        _, storage_type, key, _, numel = pid
        if key in self._storages:
            storage = self._storages[key]
            if storage.array.dtype != storage_type.dtype:
                raise self._refuse(f"reads the storage {key[:100]!r} as {storage_type.name} "
                                   f"and as {storage.array.dtype}.")
        else:
            data = self._read_record(f"{self._prefix}data/{key}")
            itemsize = storage_type.dtype.itemsize
            if len(data) % itemsize:
                raise self._refuse(f"has a storage {key[:100]!r} of {len(data)} bytes, not "
                                   f"a whole number of {storage_type.name} values.")
            storage = _Storage(key, np.frombuffer(data, dtype=storage_type.dtype))
            self._storages[key] = storage
        if storage.array.size < numel:
            raise self._refuse(f"has a storage {key[:100]!r} of {storage.array.size} values; "
                               f"its pickle says {numel}.")
        return storage

    def _rebuild_tensor(self, storage, storage_offset, size, stride, requires_grad=False,
                        backward_hooks=None, metadata=None):
        """`torch._utils._rebuild_tensor_v2`'s arguments, checked -> a `_Tensor`."""
        if not isinstance(storage, _Storage):
            raise self._refuse(f"rebuilds a tensor from a {type(storage).__name__}, "
                               "not a storage.")
        if not (isinstance(size, tuple) and isinstance(stride, tuple)
                and all(_is_int(n) and n >= 0 for n in size + stride)
                and len(size) == len(stride) <= _MAX_DIMENSIONS
                and _is_int(storage_offset) and storage_offset >= 0):
            raise self._refuse(
                f"has a tensor whose offset, size or strides are not non-negative integers "
                f"of one length (at most {_MAX_DIMENSIONS}): offset {_short(storage_offset)}, "
                f"size {_short(size)}, stride {_short(stride)}.")
        available = storage.array.size
        numel = math.prod(size)
        if numel:
            extent = storage_offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1
            if extent > available or numel > available:
                raise self._refuse(
                    f"has a tensor of size {size} with stride {stride} at offset "
                    f"{storage_offset} that reads outside its storage {storage.key[:100]!r} "
                    f"({available} values).")
        elif max(size, default=0) > max(available, 2**31):
            raise self._refuse(f"has an empty tensor of size {size}, larger than its storage.")
        if not isinstance(requires_grad, bool) or backward_hooks:
            raise self._refuse("has a tensor with hooks or a non-boolean requires_grad, "
                               "which a state dict of tensors never has.")
        return _Tensor(storage, storage_offset, size, stride)


def _short(value):
    """A bounded repr of a value from a file (a pickle may nest deeply)."""
    if isinstance(value, tuple) and all(_is_int(v) for v in value):
        text = repr(value)
    elif _is_int(value):
        text = repr(value)
    else:
        return f"a {type(value).__name__}"
    return text if len(text) <= 100 else text[:100] + " ...)"


def read_pytorch_bin(path):
    """name -> NumPy array of a `pytorch_model.bin` (PyTorch's zip format),
    through `_RestrictedUnpickler`; a file that is not a plain state dict of
    tensors that lie inside their storages is a ValueError naming it."""
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"PK\x03\x04":
        if magic[:1] == b"\x80":
            raise ValueError(f"{path} is in PyTorch's legacy (pre-1.6) format, which only a "
                             f"full unpickler reads: refused. {_CONVERT_HINT}")
        raise ValueError(f"{path} is not a PyTorch checkpoint: it is not a zip archive "
                         "(truncated, or another format).")
    try:
        return _read_pytorch_zip(path)
    except _Refused:
        raise
    except Exception as e:  # zipfile, zlib, pickle and NumPy each raise their own
        raise ValueError(f"{path} is not a readable PyTorch checkpoint ({_describe(e)}).") \
            from None


def _read_pytorch_zip(path):
    budget = [os.path.getsize(path)]  # bytes the records read may still hold

    with zipfile.ZipFile(path) as archive:
        infos = {info.filename: info for info in archive.infolist()}

        def read_record(name):
            info = infos.get(name)
            if info is None:
                raise _Refused(f"{path} lacks the record {name[:200]!r}.")
            if info.file_size > budget[0]:
                raise _Refused(f"{path}'s records hold more bytes than the file itself "
                               f"({os.path.getsize(path)}): it is not a PyTorch checkpoint.")
            budget[0] -= info.file_size
            data = archive.read(info)
            if len(data) != info.file_size:
                raise _Refused(f"{path}'s record {name[:200]!r} is truncated.")
            return data

        pickles = [n for n in infos if n == "data.pkl" or n.endswith("/data.pkl")]
        if len(pickles) != 1:
            raise _Refused(f"{path} is not a PyTorch checkpoint (it holds {len(pickles)} "
                           "data.pkl records; expected one).")
        prefix = pickles[0][: -len("data.pkl")]
        if f"{prefix}byteorder" in infos and read_record(f"{prefix}byteorder") != b"little":
            raise _Refused(f"{path} holds big-endian storages, which this reader does not "
                           f"convert. {_CONVERT_HINT}")
        data = read_record(pickles[0])
        _check_opcodes(data, path)
        unpickler = _RestrictedUnpickler(io.BytesIO(data), read_record, prefix, path)
        state = unpickler.load()
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, _Tensor) for k, v in state.items()):
        raise _Refused(f"{path} does not hold a state dict (names to tensors).")
    return _materialize(state, path, unpickler.storage_bytes)


def _check_opcodes(data, path):
    """Every opcode of the pickle `data` among `_OPCODES` (and its counted
    strings inside it: `pickletools` reads them, and its frames), its memo
    indices below the number of opcodes (the unpickler sizes its memo by the
    largest)."""
    for count, (opcode, argument, position) in enumerate(pickletools.genops(data)):
        if opcode.name not in _OPCODES:
            raise _Refused(f"{path}'s pickle uses the opcode {opcode.name}, which a state "
                           f"dict of tensors never needs: refused. {_CONVERT_HINT}")
        if opcode.name.endswith("PUT") and argument > count:
            raise _Refused(f"{path}'s pickle puts to memo index {argument} after {count} "
                           "opcodes: it is not a pickle PyTorch writes.")
        if opcode.name == "FRAME" and argument > len(data) - position - 9:
            raise _Refused(f"{path}'s pickle has a frame of {argument} bytes, past its end.")


def _materialize(state, path, storage_bytes):
    """The arrays of `state`'s tensors: tied tensors (the same view of one
    storage) once; the distinct ones may not hold more bytes than the
    storages they read (`storage_bytes`), so memory stays bounded by the
    file's size."""
    distinct = {}
    for tensor in state.values():
        distinct.setdefault(tensor.identity, tensor)
    total = sum(t.nbytes for t in distinct.values())
    if total > storage_bytes:
        raise _Refused(f"{path}'s tensors overlap: together they hold {total} bytes, from "
                       f"{storage_bytes} bytes of storage.")
    arrays = {identity: tensor.array() for identity, tensor in distinct.items()}
    return {name: arrays[tensor.identity] for name, tensor in state.items()}
