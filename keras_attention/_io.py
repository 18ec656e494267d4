"""File writing shared by the package and the recipes."""

import contextlib
import errno
import json
import math
import os
import shutil
import tempfile

# What a write that fails for lack of room or a lost disk raises.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})


def read_json(path, what="a JSON file"):
    """The JSON value in `path`; a ValueError naming the file (and `what`
    it is) when it is not valid JSON, e.g. truncated by a full disk."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError) as e:  # json.JSONDecodeError is a ValueError
        raise ValueError(f"{path} ({what}) is not valid JSON: {e}.") from None


def load_weights_checked(model, path, what="checkpoint"):
    """`model.load_weights(path)` with a clear error naming `path` (and
    `what` it is) for a missing, truncated or mismatched weights file."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"The {what} {path!r} does not exist.")
    try:
        model.load_weights(path)
    except Exception as e:  # h5py, Keras and OS errors all mean "cannot read it"
        raise ValueError(f"Cannot read the {what} {path!r} (truncated, or saved from "
                         f"another model?): {e}") from None


def save_weights_atomic(model, path, what="checkpoint"):
    """`model.save_weights(path)` through a hidden temporary file in the same
    folder, renamed into place: never a half-written file under `path`, and a
    failed write (a full disk) leaves nothing behind and raises an OSError
    naming `path`."""
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".tmp-{name}")  # still *.weights.h5, as Keras requires
    # h5py cannot fail cleanly on a full disk: its writes fail inside object
    # destructors and the process then crashes (exit 139). So the room is
    # checked first: the weights' bytes, plus a margin for HDF5's metadata.
    needed = int(1.25 * sum(_nbytes(w) for w in model.weights)) + (1 << 20)
    free = shutil.disk_usage(folder or ".").free
    if free < needed:
        raise OSError(errno.ENOSPC, f"Could not write the {what} {path}: it needs about "
                      f"{needed / 2**20:.1f} MiB and {free / 2**20:.1f} MiB are free there. "
                      "Free some space and run the same command again.")
    _write_then_rename(model.save_weights, tmp, path, f"the {what} ")


def _nbytes(variable):
    size = math.prod(int(dim) for dim in variable.shape)
    return size * _ITEMSIZE.get(str(getattr(variable, "dtype", "float32")), 4)


_ITEMSIZE = {"float64": 8, "int64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1,
             "bool": 1}


def _write_then_rename(write, tmp, path, what=""):
    """`write(tmp)`, then `tmp` renamed to `path`; when either fails, `tmp` is
    removed and an OSError (a full disk) names `what` and `path`."""
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        if isinstance(e, OSError):  # e.g. a full disk: an old `path` is still whole
            raise OSError(e.errno, f"Could not write {what}{path}: {e.strerror or e}") from None
        raise


@contextlib.contextmanager
def named_write_errors(describe, tensorflow=False, cleanup=None):
    """Turns a write that fails (an OSError; with `tensorflow`, also
    TensorFlow's ResourceExhaustedError and DataLossError, what its savers
    raise for a full disk) into one OSError whose message is
    `describe(reason)`, after `cleanup()`."""
    errors = (OSError,)
    if tensorflow:
        import tensorflow as tf

        errors += (tf.errors.ResourceExhaustedError, tf.errors.DataLossError)
    try:
        yield
    except errors as e:
        if cleanup is not None:
            cleanup()
        reason = getattr(e, "message", None) or getattr(e, "strerror", None) or str(e)
        raise OSError(describe(reason.strip())) from None


def atomic_write_text(path, text):
    """Writes `text` (UTF-8) to a temporary file, then renames it to `path`:
    readers, and a run killed mid-write, never see half a file."""
    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    _write_then_rename(write, f"{path}.tmp", path)


class Layout:
    """What a kind of directory this package writes holds at its top level:
    `required` names (all present) and `allowed` ones (nothing else). With
    `overwrite=True` only a directory of that layout is replaced: a run
    directory, a parent folder or anyone else's files are refused."""

    def __init__(self, kind, required, allowed=()):
        self.kind = kind
        self.required = frozenset(required)
        self.allowed = self.required | frozenset(allowed)

    def foreign_entries(self, directory):
        """The top-level names of `directory` that this layout does not have
        (missing required names are listed as `missing: name`)."""
        names = set(os.listdir(directory))
        return sorted(names - self.allowed) + sorted(
            f"missing: {n}" for n in self.required - names)


def check_replaceable(directory, overwrite=False, layout=None):
    """Raises FileExistsError when `directory` is a file, or a non-empty
    folder and not `overwrite`, or (with `overwrite` and a `layout`) a
    non-empty folder that is not of that layout: overwrite replaces only what
    this package wrote there itself."""
    if not os.path.exists(directory):
        return
    if not os.path.isdir(directory):
        kind = layout.kind if layout is not None else "target"
        raise FileExistsError(f"{directory} exists and is a file, not a {kind} directory; "
                              "choose another path.")
    if not os.listdir(directory):
        return
    if not overwrite:
        raise FileExistsError(f"{directory} exists; pass overwrite=True to replace it.")
    if layout is not None:
        foreign = layout.foreign_entries(directory)
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise FileExistsError(
                f"{directory} is not a {layout.kind} directory ({shown}); overwrite=True "
                f"replaces only a {layout.kind} this package wrote, never a run directory "
                "or another folder. Choose a new or empty path.")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def recover_leftovers(directory, prefix):
    """Cleans up after an `atomic_directory` of `directory` whose process was
    killed (kill -9, a power cut): its temporary folders next to `directory`
    (`<prefix><name>.<pid>.new-*`, `...old-*`) whose process is gone are
    removed, except that an old folder is renamed back to `directory` when
    the kill came between the two renames (`directory` missing). Folders of
    a live process are left alone."""
    directory = os.path.abspath(os.fspath(directory))
    parent, name = os.path.split(directory)
    stem = f"{prefix}{name}."
    if not os.path.isdir(parent):
        return
    for entry in sorted(os.listdir(parent)):
        if not entry.startswith(stem):
            continue
        pid, _, kind = entry[len(stem):].partition(".")
        if not pid.isdigit() or not kind.startswith(("new-", "old-")) or _pid_alive(int(pid)):
            continue
        path = os.path.join(parent, entry)
        if kind.startswith("old-") and not os.path.lexists(directory):
            os.replace(path, directory)
        else:
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def atomic_directory(directory, prefix, overwrite=False, layout=None):
    """Yields a temporary folder (`<prefix><name>.<pid>.new-*`) next to
    `directory` to write into; when the block ends it becomes `directory`
    (replacing an existing one), and when the block raises it is removed:
    the directory appears complete or not at all. An existing non-empty
    `directory` (or a file there) raises FileExistsError first, unless
    `overwrite` and (given a `layout`) it is of that layout
    (`check_replaceable`). What a killed earlier call left behind is cleaned
    up first (`recover_leftovers`)."""
    directory = os.fspath(directory)
    recover_leftovers(directory, prefix)
    check_replaceable(directory, overwrite, layout)
    parent, name = os.path.split(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)
    stem = f"{prefix}{name}.{os.getpid()}."
    tmp = tempfile.mkdtemp(prefix=stem + "new-", dir=parent)
    try:
        try:
            yield tmp
        except OSError as e:
            if e.errno not in WRITE_ERRNOS:
                raise
            raise OSError(e.errno, f"Could not write {directory}: {e.strerror or e}; nothing "
                          "was left there.") from None
        # Checked again: the folder may have changed while `tmp` was written.
        check_replaceable(directory, overwrite, layout)
        if os.path.isdir(directory):
            # Renamed aside first, then removed: `directory` is never half
            # deleted (a kill between the two renames leaves the old one
            # whole as `<prefix><name>.<pid>.old-*`, which the next call
            # renames back).
            old = tempfile.mkdtemp(prefix=stem + "old-", dir=parent)
            os.rmdir(old)
            os.replace(directory, old)
            os.replace(tmp, directory)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, directory)
        os.chmod(directory, 0o777 & ~_UMASK)  # mkdtemp's folders are 0700
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _read_umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once, at import: setting it is process-wide


def file_inside(directory, prefix, config, key):
    """The path of the file `config[key]` names, which must be a plain file
    name inside `directory`: a preset comes from a hub, and what it names
    must never lead outside it (`../../x`, `/etc/passwd`)."""
    name = config.get(key)
    config_path = os.path.join(directory, f"{prefix}.json")
    if (not isinstance(name, str) or name in ("", ".", "..") or os.path.basename(name) != name
            or os.path.isabs(name) or (os.altsep and os.altsep in name)):
        raise ValueError(f"{config_path}: {key} must be a file name inside {directory} (no "
                         f"folders); received {name!r:.100}. A tokenizer reads only its own "
                         "folder.")
    # (A link is followed: Hugging Face's hub cache links each file of a
    # snapshot to its blob, outside the snapshot's folder.)
    return os.path.join(directory, name)
