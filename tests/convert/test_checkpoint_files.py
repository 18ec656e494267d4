"""The checkpoint readers on untrusted files: a seeded mutation fuzz of
`pytorch_model.bin` (truncated, bytes changed, and pickles written here
whose tensors have bad offsets, sizes, strides, storages, dtypes, opcodes
and records) and of `.safetensors` (truncated, bytes changed, altered
headers), and the sharded index's names. Every mutation reads back either
as a ValueError naming the file, or as arrays that fit in the file's size:
never another exception, a crash or an allocation beyond the file. No
PyTorch is needed: the pickles are written opcode by opcode."""

import json
import pathlib
import random
import struct
import zipfile

import numpy as np
import pytest

from keras_attention.convert import checkpoint_files

pytestmark = pytest.mark.backend_independent

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "marian"
PICKLED = FIXTURES / "shared_swish_bin" / "pytorch_model.bin"
SAFETENSORS = FIXTURES / "shared_swish" / "model.safetensors"


def _text(value):  # BINUNICODE
    data = value.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def _int(value):  # LONG1: any integer, negative or huge included
    data = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(data)]) + data


def _ints(values):
    return b"(" + b"".join(_int(v) for v in values) + b"t"  # MARK ... TUPLE


def _tensor_pickle(tensors, storage_class="FloatStorage", extra=b""):
    """PyTorch's state-dict pickle (protocol 2, as `torch.save` writes it) of
    `tensors`: (name, storage key, numel, offset, size, stride) each."""
    out = [b"\x80\x02", b"ccollections\nOrderedDict\n)R", b"("]  # OrderedDict(), MARK
    for name, key, numel, offset, size, stride in tensors:
        out += [_text(name), b"ctorch._utils\n_rebuild_tensor_v2\n", b"(",
                b"(", _text("storage"), f"ctorch\n{storage_class}\n".encode(), _text(key),
                _text("cpu"), _int(numel), b"tQ",  # TUPLE, BINPERSID
                _int(offset), _ints(size), _ints(stride), b"\x89",  # NEWFALSE
                b"ccollections\nOrderedDict\n)R", b"tR"]  # hooks; TUPLE, REDUCE
    return b"".join(out) + b"u" + extra + b"."  # SETITEMS, STOP


def _write_zip(path, pickle_bytes, storages, compress=zipfile.ZIP_STORED, byteorder=b"little"):
    with zipfile.ZipFile(path, "w", compression=compress) as archive:
        archive.writestr("archive/data.pkl", pickle_bytes)
        archive.writestr("archive/byteorder", byteorder)
        for key, data in storages.items():
            archive.writestr(f"archive/data/{key}", data)
    return path


VALUES = np.arange(24, dtype=np.float32)
STORAGES = {"0": VALUES.tobytes(), "1": (VALUES + 100).tobytes()}
GOOD = [("a", "0", 24, 0, (4, 6), (6, 1)), ("b", "1", 24, 6, (3, 2), (1, 3)),
        ("tied", "0", 24, 0, (4, 6), (6, 1)), ("empty", "0", 24, 0, (0, 5), (5, 1))]


def _read(path):
    """The reader's answer: its arrays, or its ValueError (which must name
    the file); any other exception fails the test."""
    try:
        arrays = (checkpoint_files.read_pytorch_bin(str(path)) if path.suffix == ".bin"
                  else checkpoint_files.read_safetensors(str(path)))
    except ValueError as e:
        assert str(path) in str(e), e
        return e
    distinct = {id(a): a for a in arrays.values()}
    assert sum(a.nbytes for a in distinct.values()) <= path.stat().st_size
    return arrays


def test_a_hand_written_pickle_reads_as_pytorch_would(tmp_path):
    """(The writer the fuzz uses is right: its tensors read back as PyTorch
    would make them: strided views, a tied copy once, an empty tensor.)"""
    arrays = _read(_write_zip(tmp_path / "good.bin", _tensor_pickle(GOOD), STORAGES))
    table = VALUES.reshape(4, 6)
    np.testing.assert_array_equal(arrays["a"], table)
    np.testing.assert_array_equal(arrays["b"], VALUES[6:12].reshape(2, 3).T + 100)
    assert arrays["tied"] is arrays["a"] and arrays["empty"].shape == (0, 5)


def _bad_tensor(rng):
    """One tensor of `GOOD` with one argument made bad (or a storage
    record or class made so): (tensors, storages, storage class)."""
    name, key, numel, offset, size, stride = GOOD[rng.randrange(len(GOOD) - 1)]
    storages, storage_class = dict(STORAGES), "FloatStorage"
    kind = rng.choice(["stride", "offset", "size", "numel", "rank", "key", "record", "dtype",
                       "zero_stride", "overlap"])
    huge = rng.choice([2**31, 2**40, 2**63, 2**70, 10**30])
    if kind == "stride":  # negative (reads before the buffer) or past it
        bad = rng.randrange(len(stride))
        stride = tuple(rng.choice([-1, -6, huge]) if d == bad else s
                       for d, s in enumerate(stride))
    elif kind == "offset":
        offset = rng.choice([-1, -(2**40), 24, 23, huge])
    elif kind == "size":
        size = tuple(rng.choice([-1, 25, huge]) for _ in size)
    elif kind == "numel":
        numel = rng.choice([25, huge, -1])
    elif kind == "rank":
        size = size + (1,) if rng.random() < 0.5 else (1,) * 40
    elif kind == "key":
        key = rng.choice(["2", "../0", ""])
    elif kind == "record":  # the storage is not whole values, or shorter
        storages[key] = storages[key][:rng.choice([0, 7, 93])]
    elif kind == "dtype":
        storage_class = rng.choice(["ComplexFloatStorage", "QInt8Storage", "Storage"])
    elif kind == "zero_stride":  # 11 GiB asked of 96 bytes
        size, stride = (2**20, 2**10, 11), (0, 0, 0)
    else:  # the same 24 values read many times over: more than the file
        return ([(f"t{i}", "0", 24, i % 3, (20,), (1,)) for i in range(50)],
                storages, storage_class)
    return [(name, key, numel, offset, size, stride)], storages, storage_class


def test_bad_tensors_in_a_pickle_are_refused(tmp_path):
    """Seeded: 200 pickles, each with one tensor's offset, size, stride,
    numel, rank, storage key, record, storage class or overlap made bad;
    each a ValueError naming the file before any memory is read."""
    rng = random.Random(67)
    for i in range(200):
        tensors, storages, storage_class = _bad_tensor(rng)
        path = _write_zip(tmp_path / f"{i}.bin", _tensor_pickle(tensors, storage_class),
                          storages)
        result = _read(path)
        assert isinstance(result, ValueError), (tensors, storages.keys(), storage_class)
        path.unlink()


@pytest.mark.parametrize("extra, message", [
    (b"cos\nsystem\n", "asks to load os.system"),
    (b"cbuiltins\neval\n", "asks to load builtins.eval"),
    (b"ctorch._utils\n_rebuild_tensor_v2\n}b", "sets the state"),  # BUILD on a callable
    (b"ccollections\nOrderedDict\n)R}" + _text("x") + _text("y") + b"sb",
     "other than its `_metadata`"),  # BUILD of an attribute on a state dict
    (b"(ios\nsystem\n", "opcode INST"),
    (b"\x82\x01", "opcode EXT1"),
    (b"ccollections\nOrderedDict\n)\x81", "opcode NEWOBJ"),
    (b"Nr\xff\xff\xff\x7f", "memo index"),  # LONG_BINPUT 2**31 - 1: a 16 GiB memo
    (b"\x95" + struct.pack("<Q", 2**40), "a frame of 1099511627776 bytes"),
    (b"\x8e" + struct.pack("<Q", 2**40), "not a readable PyTorch checkpoint"),  # BINBYTES8
    (b"0" * 3, "not a readable PyTorch checkpoint"),  # POPs of an empty stack
    (b"Q", "persistent record that is not a storage"),  # BINPERSID of the dict
])
def test_a_pickle_runs_nothing_but_the_tensor_calls(tmp_path, extra, message):
    """An opcode or global beyond the tensor-rebuilding ones, after a good
    state dict, is refused by name (and nothing it names is called)."""
    path = _write_zip(tmp_path / "x.bin", _tensor_pickle(GOOD[:1], extra=extra),
                      {"0": VALUES.tobytes()})
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        checkpoint_files.read_pytorch_bin(str(path))


def test_archives_that_are_not_their_bytes_are_refused(tmp_path):
    """A record that decompresses to more than the file (a zip bomb), a
    big-endian checkpoint, a missing or doubled data.pkl, a legacy pickle,
    and not a zip at all."""
    pickled = _tensor_pickle(GOOD[:1])
    bomb = _write_zip(tmp_path / "bomb.bin", pickled,
                      {"0": VALUES.tobytes() + bytes(2**22)}, compress=zipfile.ZIP_DEFLATED)
    big = _write_zip(tmp_path / "big.bin", pickled, {"0": VALUES.tobytes()}, byteorder=b"big")
    none = tmp_path / "none.bin"
    with zipfile.ZipFile(none, "w") as archive:
        archive.writestr("archive/data/0", VALUES.tobytes())
    legacy, text = tmp_path / "legacy.bin", tmp_path / "text.bin"
    legacy.write_bytes(b"\x80\x02" + pickled[2:])
    text.write_bytes(b"version https://git-lfs.github.com/spec/v1\n")
    for path, message in ((bomb, "more bytes than the file"), (big, "big-endian"),
                          (none, "0 data.pkl"), (legacy, "legacy"), (text, "not a zip")):
        with pytest.raises(ValueError, match=message):
            checkpoint_files.read_pytorch_bin(str(path))


@pytest.mark.parametrize("source", [PICKLED, SAFETENSORS], ids=["pickle", "safetensors"])
def test_truncated_and_altered_files_are_refused_or_read(tmp_path, source):
    """Seeded: 150 copies of a real checkpoint, each truncated or with 1 to 8
    bytes changed (in the header or pickle part more often): a ValueError
    naming the file, or arrays within the file's size."""
    rng = random.Random(5)
    data = source.read_bytes()
    head = 4096  # the zip's first record (data.pkl) / the safetensors header
    outcomes = {"refused": 0, "read": 0}
    for i in range(150):
        mutated = bytearray(data)
        if rng.random() < 0.3:
            mutated = mutated[:rng.randrange(len(data))]
        else:
            for _ in range(rng.randint(1, 8)):
                where = rng.randrange(head if rng.random() < 0.7 else len(data))
                mutated[where] = rng.randrange(256)
        path = tmp_path / f"{i}{source.suffix}"
        path.write_bytes(bytes(mutated))
        outcomes["refused" if isinstance(_read(path), ValueError) else "read"] += 1
        path.unlink()
    assert outcomes["refused"] > 50, outcomes


def _safetensors_file(path, header, data):
    header = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


@pytest.mark.parametrize("change", [
    {"dtype": "F64"}, {"dtype": "X9"}, {"dtype": 3}, {"shape": [5, 6]}, {"shape": [-4, 6]},
    {"shape": [2**40, 2**40]}, {"shape": "4x6"}, {"data_offsets": [0, 200]},
    {"data_offsets": [8, 104]}, {"data_offsets": [96, 0]}, {"data_offsets": [-8, 88]},
    {"data_offsets": [0]}, {"header_length": 2**40}, {"header_length": 3},
    {"header": [1, 2]}, {"overlap": True},
])
def test_safetensors_headers_that_lie_are_refused(tmp_path, change):
    """A header whose dtype, shape or offsets do not describe the bytes that
    follow it (or whose length is not the header's), or two tensors over
    the same bytes: a ValueError naming the file."""
    entry = {"dtype": "F32", "shape": [4, 6], "data_offsets": [0, 96]}
    entry.update({k: v for k, v in change.items() if k in entry})
    header = {"w": entry}
    if "overlap" in change:
        header["v"] = dict(entry)
    path = _safetensors_file(tmp_path / "w.safetensors", change.get("header", header),
                             VALUES.tobytes())
    if "header_length" in change:
        raw = bytearray(path.read_bytes())
        raw[:8] = struct.pack("<Q", change["header_length"])
        path.write_bytes(bytes(raw))
    result = _read(path)
    assert isinstance(result, ValueError), result


@pytest.mark.parametrize("weight_map, message", [
    ([1, 2], "no weight_map"),
    ({"w": 3}, "no weight_map"),
    ({}, "no weight_map"),
    ({"w": "../w.safetensors"}, "not a .safetensors file of its folder"),
    ({"w": ".."}, "not a .safetensors file of its folder"),
    ({"w": "model.bin"}, "not a .safetensors file of its folder"),
    ({"w": "missing.safetensors"}, "which its folder lacks"),
    ({"v": "a.safetensors"}, "does not hold the tensors"),
    ({"w": "a.safetensors", "v": "a.safetensors"}, "does not hold the tensors"),
])
def test_a_sharded_index_names_its_shards_and_their_tensors(tmp_path, weight_map, message):
    entry = {"dtype": "F32", "shape": [4, 6], "data_offsets": [0, 96]}
    _safetensors_file(tmp_path / "a.safetensors", {"w": entry}, VALUES.tobytes())
    index = tmp_path / checkpoint_files.SAFETENSORS_INDEX_FILE
    index.write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(ValueError, match=message) as error:
        checkpoint_files.read_checkpoint(str(tmp_path))
    assert str(tmp_path) in str(error.value)
    index.write_text(json.dumps({"weight_map": {"w": "a.safetensors"}}))
    tensors, name = checkpoint_files.read_checkpoint(str(tmp_path))
    np.testing.assert_array_equal(tensors["w"], VALUES.reshape(4, 6))


H5 = FIXTURES / "shared_swish_h5" / "tf_model.h5"


def _read_h5(path):
    """`read_tf_h5`'s answer: its arrays, or its ValueError naming the file."""
    try:
        arrays = checkpoint_files.read_tf_h5(str(path))
    except ValueError as e:
        assert str(path) in str(e), e
        return e
    assert sum(a.nbytes for a in arrays.values()) <= path.stat().st_size
    return arrays


def _keras_h5(path, change=None):
    """A Keras weights file (the layout `tf_model.h5` has) with one weight
    `model/w/kernel:0`, or with `change` made to it."""
    import h5py

    other = path.parent / "other.h5"
    with h5py.File(other, "w") as f:
        f["w"] = VALUES.reshape(4, 6)
    with h5py.File(path, "w") as f:
        f.attrs["layer_names"] = [b"model"]
        group = f.create_group("model")
        group.attrs["weight_names"] = [b"w/kernel:0"]
        inner = group.create_group("w")
        if change == "soft_link":
            group["real"] = VALUES.reshape(4, 6)
            inner["kernel:0"] = h5py.SoftLink("/model/real")
        elif change == "external_link":
            inner["kernel:0"] = h5py.ExternalLink(str(other), "/w")
        elif change == "virtual":
            layout = h5py.VirtualLayout(shape=(4, 6), dtype="f4")
            layout[:] = h5py.VirtualSource(str(other), "w", shape=(4, 6))
            inner.create_virtual_dataset("kernel:0", layout)
        elif change == "external_storage":
            raw = path.parent / "raw.bin"
            raw.write_bytes(VALUES.tobytes())
            inner.create_dataset("kernel:0", (4, 6), "f4", external=[(str(raw), 0, 96)])
        elif change == "bomb":  # 1 GiB of zeros, compressed into a few kilobytes
            inner.create_dataset("kernel:0", (2**14, 2**14), "f4", chunks=(1024, 1024),
                                 compression="gzip", fillvalue=0.0)
            inner["kernel:0"][:1024, :1024] = 0.0
        elif change in ("int32", "complex64", "S8"):
            inner["kernel:0"] = VALUES.reshape(4, 6).astype(change)
        elif change == "empty":  # HDF5's null dataspace: no shape at all
            inner.create_dataset("kernel:0", data=h5py.Empty("f4"))
        elif change == "group":
            inner.create_group("kernel:0")
        elif change == "missing":
            inner["bias:0"] = VALUES
        elif change == "duplicate":
            inner["kernel:0"] = VALUES.reshape(4, 6)
            group.attrs["weight_names"] = [b"w/kernel:0", b"w/kernel:0"]
        elif change == "parent":
            inner["kernel:0"] = VALUES.reshape(4, 6)
            group.attrs["weight_names"] = [b"../model/w/kernel:0"]
        elif change == "names":
            inner["kernel:0"] = VALUES.reshape(4, 6)
            group.attrs["weight_names"] = np.arange(3)
        elif change == "no_layer_names":
            inner["kernel:0"] = VALUES.reshape(4, 6)
            del f.attrs["layer_names"]
        else:
            inner["kernel:0"] = VALUES.reshape(4, 6)
    return path


def test_a_keras_weights_file_reads_as_pytorch_names(tmp_path):
    """(The writer the cases below change is right: its kernel reads back
    transposed, under PyTorch's name.)"""
    arrays = _read_h5(_keras_h5(tmp_path / "good.h5"))
    assert list(arrays) == ["w.weight"]
    np.testing.assert_array_equal(arrays["w.weight"], VALUES.reshape(4, 6).T)


@pytest.mark.parametrize("change, message", [
    ("soft_link", "a soft link"), ("external_link", "an external link"),
    ("virtual", "virtual dataset"), ("external_storage", "external files"),
    ("bomb", "more than the file"), ("int32", "dtype int32"), ("complex64", "dtype complex64"),
    ("S8", "dtype |S8"), ("empty", "no shape"), ("group", "not a dataset"),
    ("missing", "lacks the weight"), ("duplicate", "no name of its own"),
    ("parent", "not a path of datasets"), ("names", "not a name"),
    ("no_layer_names", "no layer_names"),
])
def test_keras_weights_that_reach_outside_or_lie_are_refused(tmp_path, change, message):
    """A link (soft, or to another file), a virtual or externally stored
    dataset, a dataset larger than the file (compressed), a dtype or rank
    no weight has, no shape, a name that is not a dataset's: a ValueError naming the
    file and the defect, before anything is read."""
    result = _read_h5(_keras_h5(tmp_path / "w.h5", change))
    assert isinstance(result, ValueError) and message in str(result), result


def test_truncated_and_altered_tensorflow_weights_are_refused_or_read(tmp_path):
    """Seeded: 60 copies of a real tf_model.h5, truncated anywhere, or with 1
    to 8 bytes of its weights' values changed: a ValueError naming the
    file, or arrays within the file's size. (Bytes of HDF5's own structures
    are not mutated at random: that tests the HDF5 library, not this
    reader; the structured cases above alter them on purpose.)"""
    import h5py

    rng = random.Random(11)
    data = H5.read_bytes()
    with h5py.File(H5, "r") as f:
        values = [(d.id.get_offset(), d.id.get_storage_size()) for d in _datasets(f)]
    outcomes = {"refused": 0, "read": 0}
    for i in range(60):
        mutated = bytearray(data)
        if i % 2:
            mutated = mutated[:rng.randrange(len(data))]
        else:
            for _ in range(rng.randint(1, 8)):
                offset, size = rng.choice(values)
                mutated[offset + rng.randrange(size)] = rng.randrange(256)
        path = tmp_path / f"{i}.h5"
        path.write_bytes(bytes(mutated))
        outcomes["refused" if isinstance(_read_h5(path), ValueError) else "read"] += 1
        path.unlink()
    assert outcomes["refused"] >= 30 and outcomes["read"] >= 20, outcomes


def _datasets(group):
    import h5py

    found = []
    group.visititems(lambda name, node: found.append(node)
                     if isinstance(node, h5py.Dataset) else None)
    return found
