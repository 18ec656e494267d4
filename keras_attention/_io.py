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
    if os.path.isdir(path):
        raise IsADirectoryError(f"The {what} {path!r} is a directory, not a .weights.h5 file.")
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

    atomic_write(path, write)


def write_json(path, value, sort_keys=False):
    """`value` as indented JSON (a final newline), written atomically."""
    atomic_write_text(path, json.dumps(value, indent=2, sort_keys=sort_keys) + "\n")


def atomic_write(path, write, what=""):
    """`write(tmp)` into a hidden temporary file in `path`'s folder (with
    `path`'s extension, for writers that go by it, such as matplotlib), then
    renamed to `path`: an existing `path` is replaced whole or not at all,
    and a failed write (a full disk) leaves nothing behind and raises an
    OSError naming `path` ("Could not write PATH: No space left on
    device")."""
    folder, name = os.path.split(os.fspath(path))
    _write_then_rename(write, os.path.join(folder, f".tmp-{os.getpid()}-{name}"), path, what)


LOCK_FILE = ".lock"


class DirectoryInUseError(OSError):
    """Another process holds `directory_lock` on the directory."""


@contextlib.contextmanager
def directory_lock(directory, command, advice="wait for it to end, or stop it"):
    """Holds an exclusive lock on `directory` for the `with` block (created
    when missing): `fcntl.flock` on `<directory>/.lock`, which records the
    holder (process id, host, `command`, start time). Another holder, in this
    process or another, gets DirectoryInUseError at once, naming the
    holder, and `advice`. The kernel drops the lock when its process dies (no
    stale lock); the file is removed on release, and a directory this call
    created is removed too when nothing else was written in it (a refused
    command leaves no trace)."""
    import fcntl
    import socket
    import time

    directory = os.fspath(directory)
    created = not os.path.isdir(directory)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, LOCK_FILE)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise DirectoryInUseError(
                f"{directory} is in use by {holder} (lock file {path}): two commands writing "
                f"one run directory at once would corrupt it. {advice[:1].upper()}{advice[1:]}."
            ) from None
        try:  # the file locked is still the one at `path` (a holder removes it on release)
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        record = {"pid": os.getpid(), "host": socket.gethostname(), "command": command,
                  "started": time.strftime("%Y-%m-%d %H:%M:%S %z")}
        os.write(fd, json.dumps(record).encode("utf-8"))
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)
        os.close(fd)
        if created:
            with contextlib.suppress(OSError):  # only when empty
                os.rmdir(directory)


def _lock_holder(fd):
    """"process PID on HOST (COMMAND, since TIME)" from a lock file's record."""
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return (f"process {int(record['pid'])} on {record['host']} ({record['command']}, "
                f"since {record['started']})")
    except (OSError, ValueError, KeyError, TypeError):  # being written: no record yet
        return "another process"


class Layout:
    """What a kind of directory this package writes holds at its top level:
    `required` names (all present) and `allowed` ones (nothing else). With
    `overwrite=True` only a directory of that layout is replaced: a run
    directory, a parent folder or anyone else's files are refused."""

    def __init__(self, kind, required, allowed=(), folders=None):
        self.kind = kind
        self.required = frozenset(required)
        self.folders = dict(folders or {})  # name -> the Layout of that subfolder
        self.allowed = self.required | frozenset(allowed) | frozenset(self.folders)

    def foreign_entries(self, directory):
        """The names in `directory` that this layout does not have, down
        into its `folders` (`assets/notes`; missing required names are listed
        as `missing: name`): a user's file or folder anywhere in it is named."""
        names = set(os.listdir(directory))
        foreign = sorted(names - self.allowed)
        for name, layout in sorted(self.folders.items()):
            path = os.path.join(directory, name)
            if name not in names:
                continue
            if os.path.islink(path) or not os.path.isdir(path):
                foreign.append(name)
            else:
                foreign += [f"{name}/{entry}" for entry in layout.foreign_entries(path)]
        return foreign + sorted(f"missing: {n}" for n in self.required - names)


def check_replaceable(directory, overwrite=False, layout=None, option="overwrite=True"):
    """Raises FileExistsError when `directory` is a file, or a non-empty
    folder and not `overwrite`, or (with `overwrite` and a `layout`) a
    non-empty folder that is not of that layout: overwrite replaces only what
    this package wrote there itself. `option`: what the caller's user passes
    to replace it (`overwrite=True`, a command's `--overwrite`), named in the
    message; None where the call has no such option."""
    if not os.path.exists(directory):
        return
    if not os.path.isdir(directory):
        kind = layout.kind if layout is not None else "target"
        raise FileExistsError(f"{directory} exists and is a file, not a {kind} directory; "
                              "choose another path.")
    if not os.listdir(directory):
        return
    if not overwrite:
        advice = f"pass {option} to replace it" if option else "choose another path"
        raise FileExistsError(f"{directory} exists; {advice}.")
    if layout is not None:
        foreign = layout.foreign_entries(directory)
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise FileExistsError(
                f"{directory} is not a {layout.kind} directory ({shown}); "
                f"{option or 'overwriting'} replaces only a {layout.kind} this package wrote, "
                "never a run directory or another folder. Choose a new or empty path.")


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
def atomic_directory(directory, prefix, overwrite=False, layout=None, option="overwrite=True"):
    """Yields a temporary folder (`<prefix><name>.<pid>.new-*`) next to
    `directory` to write into; when the block ends it becomes `directory`
    (replacing an existing one), and when the block raises it is removed:
    the directory appears complete or not at all. An existing non-empty
    `directory` (or a file there) raises FileExistsError first, unless
    `overwrite` and (given a `layout`) it is of that layout
    (`check_replaceable`, whose message names `option`). What a killed
    earlier call left behind is cleaned up first (`recover_leftovers`)."""
    directory = os.fspath(directory)
    recover_leftovers(directory, prefix)
    check_replaceable(directory, overwrite, layout, option)
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
        check_replaceable(directory, overwrite, layout, option)
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
    return path_inside(directory, name, config_path)


def _hub_blob(directory, real):
    """Whether `real` (a resolved path) is a blob of the Hugging Face hub
    cache whose snapshot holds `directory` (`<repo>/snapshots/<rev>/...`
    links each file to `<repo>/blobs/<hash>`, a plain file)."""
    parts = os.path.abspath(directory).split(os.sep)
    if "snapshots" not in parts:
        return False
    repo = os.sep.join(parts[: len(parts) - 1 - parts[::-1].index("snapshots")])
    blobs = os.path.join(repo, "blobs")
    return (not os.path.islink(blobs) and os.path.isdir(blobs)
            and os.path.dirname(real) == os.path.realpath(blobs))


def path_inside(directory, name, what=None):
    """`directory`/`name`, refused (ValueError naming `what`, the file that
    names it, and `name`) when it resolves outside `directory`: a preset
    must never make this package read outside it (a link to ~/.ssh, to
    /etc). The one exception: Hugging Face's hub cache, which links each
    file of a snapshot to its blob (`_hub_blob`)."""
    path = os.path.join(directory, name)
    real, root = os.path.realpath(path), os.path.realpath(directory)
    if (os.path.commonpath([real, root]) != root or real == root) and not _hub_blob(
            directory, real):
        raise ValueError(f"{what or path}: {name!r:.100} leads outside {directory} (a link or a "
                         "path to elsewhere); a preset's files must be inside it. Copy the "
                         "file into the folder instead of linking it.")
    return path
