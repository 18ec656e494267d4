"""Joining the parts of a sharded `translate_file` (`shard=(I, N)`, the
command's `--shard I/N`): `merge` interleaves their chunks back into exactly
the bytes of one unsharded run (`keras_attention.translation.files`' rules),
after checking each part against the `<part>.shard.json` its shard wrote."""

import hashlib
import os

from keras_attention._io import atomic_write, read_json

PARTIAL_SUFFIX = ".partial"
SHARD_SUFFIX = ".shard.json"
FORMAT = "keras_attention.translate_file/1"


def merge(parts, output):
    """Joins the parts of a sharded `translate_file` (`shard=(I, N)`, the
    command's `--shard I/N`) into `output`: exactly the file one unsharded
    run writes. The parts may come in any order; each must be finished
    (with its `<part>.shard.json`), all N of them of the same source and
    options, unchanged since they were written, or a ValueError says which
    is not. `output` is written atomically. Returns the lines written."""
    parts = [os.fspath(p) for p in parts]
    output = os.fspath(output)
    if not parts:
        raise ValueError("`parts` is empty: give the files the shards wrote.")
    if os.path.isdir(output):
        raise IsADirectoryError(f"The output {output!r} is a directory; name the file to write.")
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"The output's folder {folder!r} does not exist; create it first.")
    described = [(part, _part_description(part, output)) for part in parts]
    first_part, first = described[0]
    count = first["shard"][1]
    by_index = {}
    for part, meta in described:
        if meta["source"] != first["source"]:
            raise ValueError(f"{part} and {first_part} are parts of different source files "
                             f"(SHA-256 {meta['source']['sha256'][:12]}... and "
                             f"{first['source']['sha256'][:12]}...).")
        if meta["options"] != first["options"]:
            keys = sorted(k for k in set(meta["options"]) | set(first["options"])
                          if meta["options"].get(k) != first["options"].get(k))
            raise ValueError(f"{part} and {first_part} were translated with different options "
                             f"({', '.join(keys)}).")
        index, parts_count = meta["shard"]
        if parts_count != count:
            raise ValueError(f"{part} is shard {index}/{parts_count} and {first_part} shard "
                             f"{first['shard'][0]}/{count}: the parts of one run share N.")
        if index in by_index:
            raise ValueError(f"Shard {index}/{count} is given twice: {by_index[index]} and "
                             f"{part}.")
        by_index[index] = part
    missing = [f"{i}/{count}" for i in range(count) if i not in by_index]
    if missing:
        raise ValueError(f"Missing shard(s) {', '.join(missing)}: merge needs all {count} parts "
                         f"of the file ({len(by_index)} given).")
    metas = dict(described)
    lines, chunk_size = first["source"]["lines"], first["options"]["chunk_size"]

    def write(tmp):
        offsets, digests = [0] * count, [hashlib.sha256() for _ in range(count)]
        with open(tmp, "wb") as out:
            for chunk in range(-(-lines // chunk_size)):
                index = chunk % count
                with open(by_index[index], "rb") as f:
                    f.seek(offsets[index])
                    for _ in range(min(chunk_size, lines - chunk * chunk_size)):
                        line = f.readline()
                        if not line.endswith(b"\n"):
                            raise _changed(by_index[index])
                        out.write(line)
                        digests[index].update(line)
                    offsets[index] = f.tell()
            for index, part in by_index.items():
                if (offsets[index] != metas[part]["size"]
                        or digests[index].hexdigest() != metas[part]["sha256"]):
                    raise _changed(part)
            out.flush()
            os.fsync(out.fileno())

    atomic_write(output, write)
    return lines


def _part_description(part, output):
    """A part's `<part>.shard.json`, checked."""
    if not os.path.isfile(part):
        running = os.path.exists(part + PARTIAL_SUFFIX)
        raise FileNotFoundError(f"The part {part!r} does not exist" + (
            f" (its shard is not finished: {part + PARTIAL_SUFFIX} exists)." if running else "."))
    if os.path.abspath(part) == os.path.abspath(output) or (
            os.path.exists(output) and os.path.samefile(part, output)):
        raise ValueError(f"The output {output!r} is one of the parts; write it to another file.")
    sidecar = part + SHARD_SUFFIX
    if not os.path.isfile(sidecar):
        raise ValueError(f"{part} has no {sidecar}: merge joins the finished parts that "
                         "translate_file(shard=(I, N)) (the command's --shard I/N) wrote.")
    meta = read_json(sidecar, "a shard's description")
    try:
        index, count = meta["shard"]
        ok = (meta["format"] == FORMAT and 0 <= index < count
              and isinstance(meta["options"]["chunk_size"], int)
              and all(isinstance(meta[k], int) for k in ("lines", "size"))
              and isinstance(meta["source"]["lines"], int) and isinstance(meta["sha256"], str))
    except (KeyError, TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{sidecar} is not the description of a part that translate_file "
                         f"wrote ({FORMAT}).")
    if os.path.getsize(part) != meta["size"]:
        raise _changed(part)
    return meta


def _changed(part):
    return ValueError(f"{part} is not the part its {part + SHARD_SUFFIX} describes (changed or "
                      "cut since its shard wrote it); run that shard again.")
