"""A TCP port in front of a real server that a test can take down and bring back: down, nothing
listens (connections are refused) and every connection through it is cut; up, connections are
forwarded to the server (a TCP address or a Unix socket). Silent, connections stay open and new
ones are accepted, but no byte goes either way (what a NAT or a load balancer that dropped the
flows does, or a server frozen). Imported by the store outage tests."""

from __future__ import annotations

import glob
import os
import socket
import threading
from urllib.parse import parse_qs, urlsplit


def postgres_target(url: str) -> tuple[int, object]:
    """(address family, address) of the PostgreSQL server a URL names (a Unix socket folder in
    `?host=`, or host and port)."""
    parts = urlsplit(url)
    host = parse_qs(parts.query).get("host", [parts.hostname or ""])[0]
    if host.startswith("/"):
        if parts.port:
            return socket.AF_UNIX, os.path.join(host, f".s.PGSQL.{parts.port}")
        sockets = [p for p in glob.glob(os.path.join(host, ".s.PGSQL.*")) if not p.endswith(".lock")]
        return socket.AF_UNIX, sockets[0]
    return socket.AF_INET, (host or "127.0.0.1", parts.port or 5432)


class TcpSwitch:
    def __init__(self, family: int, address: object):
        self.family, self.address = family, address
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._silent = threading.Event()

    def silent(self) -> None:
        """Stop forwarding, connections left open: what is sent is lost."""
        self._silent.set()

    def speak(self) -> None:
        """Forward again (connections made while silent stay dead, as a dropped flow does)."""
        self._silent.clear()

    def up(self) -> None:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        self._listener = s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def down(self) -> None:
        if self._listener is not None:
            try:  # wakes the accepting thread: a close alone leaves the socket listening while it waits
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        with self._lock:
            for c in self._open:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                c.close()
            self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if self._silent.is_set():
                with self._lock:
                    self._open.add(client)
                threading.Thread(target=self._pump, args=(client, None), daemon=True).start()
                continue
            try:
                server = socket.socket(self.family)
                server.connect(self.address)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open |= {client, server}
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket | None) -> None:
        try:
            while data := src.recv(65536):
                if dst is not None and not self._silent.is_set():
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst) if dst is not None else (src,):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
