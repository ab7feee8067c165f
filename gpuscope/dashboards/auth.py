"""Access control for a dashboard served beyond loopback: one shared token, checked on every request.

The token arrives once in the URL (``/?token=T``, the link ``gpuscope dashboard`` prints) or as
``Authorization: Bearer T``; a valid one in the URL is then kept in an HttpOnly, SameSite=Strict
cookie so Dash's own requests carry it. Anything else gets 403 before Dash sees it.
"""

from __future__ import annotations

import hmac
import secrets

from flask import Flask, Response, request

COOKIE = "gpuscope_token"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def new_token() -> str:
    return secrets.token_urlsafe(24)


def needs_token(host: str) -> bool:
    """Any address but loopback exposes the store's run names, commands and hosts to the network."""
    return host not in LOOPBACK


def _matches(supplied: str | None, token: str) -> bool:
    return supplied is not None and hmac.compare_digest(supplied.encode(), token.encode())


def _supplied() -> tuple[str | None, bool]:
    """The token the request carries, and whether it came in the URL."""
    in_url = request.args.get("token")
    if in_url is not None:
        return in_url, True
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return header[len("Bearer "):], False
    return request.cookies.get(COOKIE), False


def protect(server: Flask, token: str) -> None:
    """Refuse every request to ``server`` that does not carry ``token``."""

    @server.before_request
    def _check() -> Response | None:
        supplied, _ = _supplied()
        if not _matches(supplied, token):
            return Response("gpuscope dashboard: a valid token is required (use the link it printed)\n",
                            status=403, mimetype="text/plain")
        return None

    @server.after_request
    def _remember(response: Response) -> Response:
        supplied, in_url = _supplied()
        if in_url and _matches(supplied, token):
            response.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
        return response


def harden(server: Flask) -> None:
    """Headers every response gets: no framing by other sites, no content sniffing."""

    @server.after_request
    def _headers(response: Response) -> Response:
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response
