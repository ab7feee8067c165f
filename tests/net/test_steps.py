"""Each step of a bounded request has its limit and its name, against real loopback servers: a TLS handshake that
never comes, an answer that never comes, one that stalls half way, one that drips a byte a second (only the
deadline ends it), a redirect loop, HTTP statuses, a refused connection and a certificate that is not trusted."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuscope.net.deadline import Deadline, Timeouts
from gpuscope.net.http import FetchError, download, request
from tests import hostile as H

STEP_S = 0.5


@pytest.fixture
def server() -> Iterator[H.Hostile]:
    s = H.Hostile()
    yield s
    s.close()


def get(url: str, *, deadline_s: float = 20.0, read_s: float = STEP_S) -> bytearray:
    return download(request(url), timeouts=Timeouts(deadline=Deadline(deadline_s), connect_s=STEP_S, read_s=read_s),
                    max_bytes=1 << 20)


def failure(url: str, **limits: float) -> FetchError:
    with pytest.raises(FetchError) as caught:
        get(url, **limits)
    return caught.value


def stalls_after_headers(sock: socket.socket, server: H.Hostile) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)
    server.closed.wait(120)


def test_a_tls_handshake_that_never_comes_is_named(server: H.Hostile) -> None:
    server.behave = lambda r: H.hang  # a plain socket: it reads the TLS hello as a request that never ends
    error = failure(f"https://127.0.0.1:{server.port}/t.json")
    assert (error.kind, error.phase, error.whole) == ("timeout", "tls", False)
    assert str(error) == f"the TLS handshake did not finish within {STEP_S:g} s"


def test_an_answer_that_never_comes_is_named(server: H.Hostile) -> None:
    server.behave = lambda r: H.hang
    error = failure(server.url + "/t.json")
    assert (error.kind, error.phase, error.whole) == ("timeout", "answer", False)
    assert str(error) == f"connected, but no answer came within {STEP_S:g} s"


def test_an_answer_that_stalls_says_how_far_it_came(server: H.Hostile) -> None:
    server.behave = lambda r: stalls_after_headers
    error = failure(server.url + "/t.json")
    assert (error.kind, error.phase, error.whole) == ("timeout", "read", False)
    assert str(error) == f"the answer stalled: nothing for {STEP_S:g} s after 10 bytes"


@pytest.mark.parametrize(("headers_too", "phase", "waiting"), [
    (True, "answer", "the answer's status and headers"), (False, "read", "the rest of the answer after "),
])
def test_a_drip_is_ended_by_the_deadline_alone(server: H.Hostile, headers_too: bool, phase: str,
                                              waiting: str) -> None:
    server.behave = lambda r: H.drip(headers_too=headers_too)  # a byte a second: within any step's limit
    error = failure(server.url + "/t.json", deadline_s=2.5, read_s=5.0)
    assert (error.kind, error.phase, error.whole) == ("timeout", phase, True)
    assert str(error).startswith(f"no answer within 2.5 s (still waiting for {waiting}")


def test_a_redirect_loop_is_named(server: H.Hostile) -> None:
    server.behave = lambda r: H.answer(302, b"", headers={"Location": r.path})
    error = failure(server.url + "/t.json")
    assert error.kind == "redirects" and "loop" in str(error)
    assert len(server.requests) <= 11


def test_a_redirect_out_of_http_is_not_followed(server: H.Hostile) -> None:
    server.behave = lambda r: H.answer(302, b"", headers={"Location": "file:///etc/passwd"})
    error = failure(server.url + "/t.json")
    assert (error.kind, error.status) == ("redirects", 302) and "passwd" not in str(error)


@pytest.mark.parametrize("status", [403, 404, 500])
def test_an_http_status_is_named(server: H.Hostile, status: int) -> None:
    server.behave = lambda r: H.answer(status, b"nope")
    error = failure(server.url + "/t.json")
    assert (error.kind, error.status) == ("status", status) and str(error).startswith(f"HTTP {status} ")


def test_a_refused_connection_is_named() -> None:
    error = failure(f"http://127.0.0.1:{H.closed_port()}/t.json")
    assert error.kind == "unreachable" and "refused" in str(error).lower()


def test_an_untrusted_certificate_is_a_tls_failure(tmp_path: Path) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*_self_signed(tmp_path))
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            context.wrap_socket(conn, server_side=True).close()
        except (ssl.SSLError, OSError):
            conn.close()  # the client refused the certificate: what is meant to happen

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        error = failure(f"https://127.0.0.1:{listener.getsockname()[1]}/t.json")
    finally:
        thread.join(10)
        listener.close()
    assert error.kind == "tls" and "certificate verify failed" in str(error)


def _self_signed(folder: Path) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)
