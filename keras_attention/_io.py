"""File writing shared by the package and the recipes."""

import contextlib
import json
import os
import shutil
import tempfile


def read_json(path, what="a JSON file"):
    """The JSON value in `path`; a ValueError naming the file (and `what`
    it is) when it is not valid JSON, e.g. truncated by a full disk."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError) as e:  # json.JSONDecodeError is a ValueError
        raise ValueError(f"{path} ({what}) is not valid JSON: {e}.") from None


def atomic_write_text(path, text):
    """Writes `text` (UTF-8) to a temporary file, then renames it to `path`:
    readers, and a run killed mid-write, never see half a file."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


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


@contextlib.contextmanager
def atomic_directory(directory, prefix, overwrite=False, layout=None):
    """Yields a temporary folder (named `prefix`...) next to `directory` to
    write into; when the block ends it becomes `directory` (replacing an
    existing one), and when the block raises it is removed: the directory
    appears complete or not at all. An existing non-empty `directory` (or a
    file there) raises FileExistsError first, unless `overwrite` and (given a
    `layout`) it is of that layout (`check_replaceable`)."""
    directory = os.fspath(directory)
    check_replaceable(directory, overwrite, layout)
    parent = os.path.dirname(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        yield tmp
        # Checked again: the folder may have changed while `tmp` was written.
        check_replaceable(directory, overwrite, layout)
        if os.path.isdir(directory):
            # Renamed aside first, then removed: `directory` is never half
            # deleted (a kill leaves the old one whole, at worst renamed
            # `<prefix>old-*` next to it, or the new one).
            old = tempfile.mkdtemp(prefix=prefix + "old-", dir=parent)
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
