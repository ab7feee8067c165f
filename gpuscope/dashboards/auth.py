"""Access control: the Host a request names on loopback, and a shared token beyond loopback.

On loopback no token is needed, so the page must not answer a foreign site: a page on evil.example
whose name an attacker re-points at 127.0.0.1 (DNS rebinding) sends ``Host: evil.example``. A
dashboard listening on a loopback address answers only ``Host`` 127.0.0.1, localhost, [::1] or the
address it listens on (with its port, or none); any other gets 403.

Beyond loopback the token arrives once in the URL (``/?token=T``, the link ``gpuscope dashboard``
prints) or as ``Authorization: Bearer T``; a valid one in the URL is then kept in an HttpOnly,
SameSite=Strict cookie so Dash's own requests carry it. Anything else gets 403 before Dash sees it.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Iterable

from flask import Flask, Response, request

COOKIE = "gpuscope_token"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


LOOPBACK_HOST_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})


def is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1 or localhost (an address a socket is bound to, without brackets or port)."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def host_allowed(host_header: str, bound_address: str, port: str) -> bool:
    """Whether a request's ``Host`` names this loopback server: a loopback name, with this port or none."""
    name, sep, given_port = host_header.rpartition(":") if not host_header.endswith("]") else (host_header, "", "")
    if not sep:
        name, given_port = host_header, ""
    if given_port and given_port != port:
        return False
    bound = f"[{bound_address}]" if ":" in bound_address else bound_address
    return name.lower() in LOOPBACK_HOST_NAMES or name == bound


def check_host(server: Flask) -> None:
    """On a loopback socket, refuse requests whose Host header names another site (DNS rebinding)."""

    @server.before_request
    def _host() -> Response | None:
        bound = str(request.environ.get("SERVER_NAME", ""))
        if not is_loopback(bound):
            return None  # beyond loopback the token guards the dashboard
        port = str(request.environ.get("SERVER_PORT", ""))
        if host_allowed(request.headers.get("Host", ""), bound, port):
            return None
        return Response("gpuscope dashboard: this server answers only to localhost / 127.0.0.1 / [::1]\n",
                        status=403, mimetype="text/plain")


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


def content_security_policy(inline_script_hashes: Iterable[str]) -> str:
    """What a dashboard page may load and run: scripts from this server and Dash's one inline script (by its
    hash), requests to this server only, styles from this server or inline (Dash's components and plotly.js add
    ``<style>`` elements and ``style`` attributes at run time, which a hash cannot name), images from this server
    or data:/blob: URLs (plotly's own), nothing framed, no form posted, no ``<base>``. A run or kernel name that
    slipped into the page as HTML could neither run a script nor send a request anywhere else."""
    return "; ".join((
        "default-src 'none'",
        "script-src 'self' " + " ".join(inline_script_hashes),
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ))


def harden(server: Flask, csp: str) -> None:
    """Headers every response gets: the Content-Security-Policy ``csp``, no framing by other sites, no content
    sniffing, no referrer."""

    @server.after_request
    def _headers(response: Response) -> Response:
        response.headers.setdefault("Content-Security-Policy", csp)
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response
