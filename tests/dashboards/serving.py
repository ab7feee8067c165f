"""The dashboard over a store, served on a loopback port for the length of a block."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from werkzeug.serving import make_server

from gpuscope.dashboards import create_app
from gpuscope.store import Store
from tests.servers import serving


@contextmanager
def dashboard(store: Store, token: str | None = None) -> Iterator[int]:
    """Yield the port."""
    with serving(make_server("127.0.0.1", 0, create_app(store, token=token).server, threaded=True)) as server:
        yield server.server_port
