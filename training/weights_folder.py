"""A judge weights folder to measure with (`SOURCEGATE_JUDGE_WEIGHTS`): the shipped files linked, with the
files a run replaces written in the folder itself, so that writing them never reaches the shipped ones."""

from __future__ import annotations

import shutil
from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[1] / "src" / "sourcegate" / "judges" / "weights"


def linked_weights(out: Path, own: tuple[str, ...] = (), copied: tuple[str, ...] = ()) -> Path:
    """`out` with a link to every shipped file but those in `own` (the caller writes them; a link left there
    by an earlier folder is removed) and those in `copied` (a copy of the shipped file, kept when a file of
    this folder's own is already there)."""
    out.mkdir(parents=True, exist_ok=True)
    for f in SHIPPED.iterdir():
        if not f.is_file():
            continue
        dst = out / f.name
        if f.name in own:
            if dst.is_symlink():
                dst.unlink()
        elif f.name in copied:
            if not dst.exists() or dst.is_symlink():
                dst.unlink(missing_ok=True)
                shutil.copy(f, dst)
        else:
            if dst.exists() or dst.is_symlink():
                dst.unlink()
            dst.symlink_to(f.resolve())
    return out
