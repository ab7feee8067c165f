"""The dashboard's one guard: whatever a page, a callback or a download raises is one sentence, never a traceback.

A damaged store or record is the store's own line, on the page that needed it (``app.route``) or as the answer to
a download. Anything else is a bug of ours: an internal error naming the URL (or the callback's output), where in
gpuscope it failed, and a request to report it, as the command line's exit-3 line does. Pages show it where the
page would be (HTTP 200, so the rest of the dashboard keeps working); every other request gets it as a plain-text
HTTP 500, and the server's log gets the same one line.
"""

from __future__ import annotations

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as AnyResponse

from gpuscope.format import printable
from gpuscope.model.errors import AnalysisError


def internal_error(exc: BaseException, what: str) -> str:
    """The one line for an exception nobody expected while drawing ``what`` ("page /runs/ID", "callback for
    ..."); an AnalysisError from further in keeps its own."""
    error = exc if isinstance(exc, AnalysisError) else AnalysisError.wrap(exc, what="", stage=f"the dashboard's {what}")
    return f"internal error: {error}"


def plain(status: int, line: str) -> Response:
    """An answer of one sentence, as text (never HTML built from what the store or a request held), printable: a
    name in it reads as in every view."""
    return Response(f"gpuscope dashboard: {printable(line)}\n", status=status, mimetype="text/plain")


def requested() -> str:
    """What was asked for, as an error line names it: the path, or for a callback the output it draws."""
    if request.path.endswith("/_dash-update-component"):
        body = request.get_json(silent=True)
        output = body.get("output") if isinstance(body, dict) else None
        return f"callback for {str(output)[:200]}" if output else "callback"
    return f"answer to {request.path[:300]}"


def install(server: Flask) -> None:
    """Every exception a request raises: an HTTP status of werkzeug's as one plain-text line with its status, anything
    else as the internal error's line, HTTP 500."""

    def answer(exc: Exception) -> AnyResponse:
        if isinstance(exc, HTTPException):  # werkzeug's own page for a status is HTML of several sentences
            response = exc.get_response()
            response.set_data(f"gpuscope dashboard: {(exc.name or 'error').lower()}\n")
            response.mimetype = "text/plain"
            return response
        line = internal_error(exc, requested())
        server.logger.error("%s", line)
        return plain(500, line)

    server.register_error_handler(Exception, answer)
