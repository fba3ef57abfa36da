"""Files that hold the library and its audit are private to the user running sourcegate: the
folders it creates are 0700 and the files 0600 (the index, the audit log and its lookup index;
SQLite gives its `-wal` and `-shm` files the mode of their database). A file or folder that
already exists keeps its mode: tightening what an operator set is theirs to do."""

from __future__ import annotations

import os
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(path: str | Path) -> Path:
    """Create `path` and any missing parents, each 0700 (existing ones are left as they are)."""
    path = Path(path)
    missing = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass
    return path


def private_file(path: str | Path) -> Path:
    """Create `path` empty with mode 0600 (and its folder 0700) unless it exists."""
    path = Path(path)
    private_dir(path.parent)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    except FileExistsError:
        pass
    return path
