"""File writing shared by the package and the recipes."""

import os


def atomic_write_text(path, text):
    """Writes `text` (UTF-8) to a temporary file, then renames it to `path`:
    readers, and a run killed mid-write, never see half a file."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
