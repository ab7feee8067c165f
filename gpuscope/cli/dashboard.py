"""`gpuscope dashboard`: the web dashboard over the run store, on loopback unless told otherwise."""

from __future__ import annotations

import logging
import socket

import typer

from gpuscope.cli.common import fail, open_store, warn
from gpuscope.console import PrintableLog


def register(app: typer.Typer) -> None:
    app.command("dashboard")(dashboard)


def dashboard(
    port: int = typer.Option(8050, "--port", min=1, max=65535, help="TCP port to listen on."),
    host: str = typer.Option("127.0.0.1", "--host",
                             help="Address to bind. Anything but loopback needs a token (one is generated)."),
    token: str | None = typer.Option(None, "--token", envvar="GPUSCOPE_DASHBOARD_TOKEN",
                                     help="Require this token on every request (the printed link carries it)."),
) -> None:
    """Serve the web dashboard: every run, its verdict, cost and charts; live while a run records."""
    try:
        from werkzeug.serving import make_server

        from gpuscope.dashboards import create_app
        from gpuscope.dashboards.auth import needs_token, new_token
    except ImportError as exc:
        fail(f"the dashboard needs the [dashboard] extra ({exc.name} is missing): pip install 'gpuscope[dashboard]'")
    if token is not None and len(token) < 8:
        fail("--token must be at least 8 characters")
    if needs_token(host) and token is None:
        token = new_token()
        warn(f"binding {host} exposes your runs to the network: requests must carry the generated token")
    store = open_store()
    app = create_app(store, token=token)
    # Flask's per-request log lines would drown the one line that matters: where to point the browser.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    for logger in (logging.getLogger("werkzeug"), app.server.logger):
        logger.addFilter(PrintableLog())  # what a client sent stays text in the server's terminal
    try:
        # Bound here rather than by werkzeug, which prints a paragraph and exits when the port is taken.
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        listener = socket.create_server((host, port), family=family)
    except OSError as exc:
        store.close()
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    server = make_server(host, port, app.server, threaded=True, fd=listener.fileno())
    shown = f"[{host}]" if ":" in host else host
    print(f"gpuscope dashboard: http://{shown}:{listener.getsockname()[1]}/" + (f"?token={token}" if token else ""),
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        listener.close()
        store.close()
