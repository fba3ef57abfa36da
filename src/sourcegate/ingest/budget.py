"""A time and memory budget per file: files are parsed in a child process that is killed when a
file takes longer than the budget, and whose memory is capped, so one hostile file fails with a
reason and the others are ingested."""

from __future__ import annotations

import multiprocessing
import os
import signal
from multiprocessing.connection import Connection
from pathlib import Path

from ..models import Document
from .parsers import IngestError, parse_file

# How often the parent looks up from waiting on a parse, to honour a stop request.
_POLL_S = 0.2


def _address_space() -> int:
    """This process's virtual size in bytes (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _serve(conn: Connection, memory_mb: int | None, parent_pid: int) -> None:
    """The child: parse what the parent sends, under an address-space limit of what the forked
    process already maps plus `memory_mb`."""
    from .pipeline import _end_with_parent

    _end_with_parent(parent_pid)
    if memory_mb:
        try:
            import resource

            limit = _address_space() + memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
        except (ImportError, ValueError, OSError):  # no rlimits here: the time budget still holds
            pass
    while True:
        try:
            path, doc_id, within, named = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple = ("ok", parse_file(Path(path), doc_id, Path(within) if within else None, named))
        except IngestError as e:
            reply = ("failed", str(e))
        except MemoryError:
            # "spent": the heap the failed parse grew is not given back, so the next file gets a new process
            reply = ("spent", f"needs more than the {memory_mb} MB memory budget per file to parse "
                              "(raise SOURCEGATE_PARSE_MEMORY_MB to accept it)")
        except RecursionError:
            reply = ("failed", "nested too deeply to parse")
        except Exception as e:  # a parser bug must not stop the other files
            reply = ("failed", f"could not be parsed ({type(e).__name__}: {str(e)[:160]})")
        try:
            conn.send(reply)
        except MemoryError:
            conn.send(("spent", f"its text does not fit the {memory_mb} MB memory budget per file"))


class BudgetedParser:
    """`parse(path, doc_id)` like `parsers.parse_file`, in a child process, failing the file with
    IngestError past `timeout_s` seconds or `memory_mb` megabytes. Without fork (not Linux or
    macOS) files are parsed in this process, without a budget."""

    def __init__(self, timeout_s: float | None = 120.0, memory_mb: int | None = 2048,
                 should_stop=lambda: False):
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.should_stop = should_stop
        self._proc: multiprocessing.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self._inline = not (timeout_s or memory_mb)

    def _start(self) -> bool:
        try:
            ctx = multiprocessing.get_context("fork")
        except ValueError:
            self._inline = True
            return False
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, self.memory_mb, os.getpid()),
                                 name="sourcegate-parse", daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        return True

    def parse(self, path: Path, doc_id: str, within: Path | None = None, named: bool = False) -> list[Document]:
        """`within`, `named`: see `parsers.parse_file` (checked in the child, as the file is opened)."""
        if self._inline or (self._proc is None and not self._start()):
            return parse_file(path, doc_id, within, named)
        assert self._conn is not None and self._proc is not None
        self._conn.send((str(path), doc_id, str(within) if within else None, named))
        waited = 0.0
        while not self._conn.poll(_POLL_S):
            waited += _POLL_S
            if self.should_stop():
                self.close()
                raise IngestError("not parsed: the ingest was stopped")
            if self.timeout_s and waited >= self.timeout_s:
                self.close()
                raise IngestError(f"parsing took longer than the {self.timeout_s:g} s budget per file "
                                  "(SOURCEGATE_PARSE_TIMEOUT_S): the file was skipped")
        try:
            kind, value = self._conn.recv()
        except (EOFError, OSError):
            code = self._proc.exitcode if self._proc is not None else None
            self.close()
            how = f"killed by {signal.Signals(-code).name}" if code and code < 0 else f"exit {code}"
            raise IngestError(f"the parser process died ({how}; out of memory?): the file was skipped "
                              "(SOURCEGATE_PARSE_MEMORY_MB sets the budget)") from None
        if kind == "ok":
            return value
        if kind == "spent":  # out of its memory budget: a fresh process parses the next file
            self.close()
        raise IngestError(value)

    def close(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            conn.close()
        if proc is not None and proc.is_alive():
            proc.kill()
        if proc is not None:
            proc.join(timeout=5)
