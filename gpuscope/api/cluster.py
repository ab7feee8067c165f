"""Per-rank work on a Dask cluster (``distributed``, the ``dask`` extra) when one machine is not enough.

Each rank file is one task: the worker reads the file itself (a path its machine sees, or a URL), reduces it
to its summary and sends that back; the client's ``concurrent.futures`` executor hands the results to the
trace loader as they finish. The workers need gpuscope (the same version) and, for URLs, the filesystem
library and credentials for them in their own environment.

Everything is bounded by the command's ``Timeouts``: reaching the scheduler and its handshake within
``connect_s`` (Dask's own connect retries included), a heartbeat to the scheduler every ``HEARTBEAT_S`` that must
be answered within ``read_s`` (a scheduler that stops answering ends the command then), and every task by the
deadline, after which the tasks left are cancelled and the client closed within ``CLOSE_S``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from typing import Any

from gpuscope.api.errors import GpuscopeError
from gpuscope.model.errors import AnalysisError
from gpuscope.model.redact import redact_text, redact_url
from gpuscope.net.deadline import Timeouts, seconds_text
from gpuscope.store import StoreError
from gpuscope.traces import TraceError
from gpuscope.traces.errors import RemoteTimeout

HEARTBEAT_S = 5.0
"""How often the scheduler is asked whether it still answers, while tasks run."""
CLOSE_S = 5.0
"""How long closing the client may take (a scheduler that stopped answering never acknowledges it)."""


@contextmanager
def dask_executor(cluster: str | Any, timeouts: Timeouts | None = None) -> Iterator[Executor]:
    """An executor on the Dask cluster ``cluster`` names: a scheduler address (``tcp://host:8786``), or a
    ``distributed.Client`` already connected (left open). Failures of the cluster itself (no scheduler there, one
    that does not answer, workers without gpuscope, a lost worker) end as one GpuscopeError line."""
    timeouts = timeouts or Timeouts()
    own = isinstance(cluster, str)
    where = redact_url(cluster) if own else str(getattr(getattr(cluster, "scheduler", None), "address",
                                                             "the given client"))
    try:
        from distributed import Client
    except ImportError as exc:
        raise GpuscopeError("running on Dask needs the dask extra: pip install 'gpuscope[dask]'") from exc
    client: Any = cluster
    if own:
        _probe(cluster, where, timeouts)
        try:
            client = Client(cluster, set_as_default=False,  # type: ignore[no-untyped-call]
                            timeout=timeouts.step_s(timeouts.connect_s))
        except (OSError, TimeoutError, ValueError) as exc:
            raise GpuscopeError(f"cannot reach the Dask scheduler at {where}: {_line(exc)}") from exc
    heartbeat = _Heartbeat(client, timeouts)
    try:
        yield client.get_executor(pure=False)
    except RemoteTimeout as exc:
        if heartbeat.silent:
            raise GpuscopeError(f"the Dask scheduler at {where} stopped answering: no reply to a heartbeat within "
                                f"{timeouts.read_s:g} s") from exc
        raise
    except (GpuscopeError, TraceError, AnalysisError, StoreError, SystemExit, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - what a worker or the scheduler raised, as the one line it is
        raise GpuscopeError(f"on the Dask cluster at {where}: {_line(exc)}") from exc
    finally:
        heartbeat.stop()
        if own:
            _close(client)


class _Heartbeat:
    """Asks the scheduler who it is every ``HEARTBEAT_S``; one that does not answer within ``read_s`` is
    ``silent``, and the command's deadline is cancelled (the loader stops waiting for the tasks at once)."""

    def __init__(self, client: Any, timeouts: Timeouts) -> None:
        self.client, self.timeouts = client, timeouts
        self.silent = False
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="gpuscope-dask-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stopped.wait(HEARTBEAT_S):
            try:
                self.client.sync(self.client.scheduler.identity, callback_timeout=self.timeouts.read_s)
            except Exception:  # noqa: BLE001 - no answer, a closed comm, a timeout: the scheduler is not there
                if not self._stopped.is_set():
                    self.silent = True
                    self.timeouts.deadline.cancel()
                return

    def stop(self) -> None:
        self._stopped.set()


def _close(client: Any) -> None:
    try:
        client.close(timeout=CLOSE_S)
    except Exception:  # noqa: BLE001 - closing a client whose scheduler is gone: nothing more to do
        pass


def _probe(address: str, where: str, timeouts: Timeouts) -> None:
    """Connect to the scheduler, and wait for its handshake, before a Client does: a Client that fails to start
    leaves a half-built object whose clean-up blocks the interpreter's exit for most of a minute, and Dask's own
    connect waits for the handshake without end."""
    import asyncio  # here: asyncio alone costs a local analysis tens of ms to import

    from distributed.comm.addressing import parse_address
    from distributed.comm.registry import get_backend

    connect_s = timeouts.step_s(timeouts.connect_s)

    async def reach() -> None:
        scheme, location = parse_address(address)
        connector = get_backend(scheme).get_connector()  # type: ignore[no-untyped-call]
        try:
            comm = await asyncio.wait_for(connector.connect(location), connect_s)
        except TimeoutError as exc:
            raise GpuscopeError(f"cannot reach the Dask scheduler at {where}: no connection within "
                                f"{seconds_text(connect_s)}") from exc
        try:
            await asyncio.wait_for(comm.write(comm.handshake_info()), connect_s)
            await asyncio.wait_for(comm.read(), connect_s)
        except TimeoutError as exc:
            raise GpuscopeError(f"the Dask scheduler at {where} accepted the connection but did not answer its "
                                f"handshake within {seconds_text(connect_s)}") from exc
        finally:
            comm.abort()

    try:
        asyncio.run(reach())
    except GpuscopeError:
        raise
    except (OSError, ValueError, TypeError) as exc:
        raise GpuscopeError(f"cannot reach the Dask scheduler at {where}: {_line(exc)}") from exc
    except Exception as exc:  # noqa: BLE001 - garbage read as Dask's frames (a length of exabytes, say)
        raise GpuscopeError(f"what answered at {where} is not a Dask scheduler (its handshake could not be read: "
                            f"{type(exc).__name__})") from exc


def _line(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, ConnectionRefusedError) or "refused" in str(cause or ""):
        return "connection refused"
    text = " ".join(redact_text(str(exc)).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
