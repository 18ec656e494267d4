"""File writing shared by the package and the recipes."""

import contextlib
import os
import shutil
import tempfile


def atomic_write_text(path, text):
    """Writes `text` (UTF-8) to a temporary file, then renames it to `path`:
    readers, and a run killed mid-write, never see half a file."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def check_replaceable(directory, overwrite=False):
    """Raises FileExistsError when `directory` is a file, or a non-empty
    folder and not `overwrite`."""
    if os.path.exists(directory) and (not os.path.isdir(directory) or (
            os.listdir(directory) and not overwrite)):
        raise FileExistsError(f"{directory} exists; pass overwrite=True to replace it.")


@contextlib.contextmanager
def atomic_directory(directory, prefix, overwrite=False):
    """Yields a temporary folder (named `prefix`...) next to `directory` to
    write into; when the block ends it becomes `directory` (replacing an
    existing one), and when the block raises it is removed: the directory
    appears complete or not at all. An existing non-empty `directory` (or a
    file there) raises FileExistsError first, unless `overwrite`."""
    directory = os.fspath(directory)
    check_replaceable(directory, overwrite)
    parent = os.path.dirname(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        yield tmp
        if os.path.isdir(directory):
            shutil.rmtree(directory)
        os.replace(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
