"""An HTTP server the tests run on loopback, in a daemon thread for the length of a block: stopped, and its
listening socket closed, when the block ends, so no socket is left for the garbage collector to warn about inside a
later test."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from socketserver import BaseServer
from typing import TypeVar

Server = TypeVar("Server", bound=BaseServer)


@contextmanager
def serving(server: Server) -> Iterator[Server]:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
