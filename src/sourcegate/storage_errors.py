"""Disk faults as messages a person can act on: the file, what is wrong with it, and the fix.

A read-only or full SOURCEGATE_HOME, an index locked by another process or corrupt, an audit log
that cannot be written: each surfaces from sqlite or the OS as a terse exception. `describe()`
turns one into a sentence naming the path; None means it is not a storage fault.
"""

from __future__ import annotations

import errno
from pathlib import Path

from .audit import AuditWriteError


def _is_sqlite_error(e: BaseException) -> bool:
    # sqlite3 and pysqlite3 have separate exception classes with the same names.
    return any(c.__module__.split(".")[0] in ("sqlite3", "pysqlite3") and c.__name__.endswith("Error")
               for c in type(e).__mro__)


def describe(e: BaseException, index_path: Path, home: Path) -> str | None:
    if isinstance(e, AuditWriteError):
        return str(e)
    if _is_sqlite_error(e):
        text = str(e).lower()
        if "locked" in text or "busy" in text:
            return (f"the index {index_path} is locked by another process (an ingest still running?): "
                    "wait for it to finish or stop it, then try again")
        if "readonly" in text or "read-only" in text or "unable to open" in text:
            return (f"cannot write the index {index_path}: its folder is read-only or missing: make "
                    f"{index_path.parent} writable, or set SOURCEGATE_HOME to a writable folder")
        if "disk is full" in text or "disk or database is full" in text or "database or disk is full" in text:
            return f"the disk holding {index_path} is full: free space, or set SOURCEGATE_HOME to another disk"
        if "not a database" in text or "malformed" in text or "corrupt" in text:
            return (f"the index {index_path} is corrupt or is not a sourcegate index: move it away "
                    f"(mv {index_path} {index_path}.bad) and run `sourcegate ingest` again")
        return f"the index {index_path} cannot be used: {e}"
    if isinstance(e, OSError) and e.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.ENOTDIR,
                                              errno.EISDIR, errno.EDQUOT):
        where = e.filename or home
        fix = ("free space on that disk, or set SOURCEGATE_HOME to another one" if e.errno in (errno.ENOSPC, errno.EDQUOT)
               else "make it writable, or set SOURCEGATE_HOME to a writable folder")
        return f"cannot write {where}: {e.strerror}: {fix}"
    return None
