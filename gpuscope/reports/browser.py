"""Finding and driving a headless Chromium over the DevTools protocol, through a pipe.

Chromium started with ``--remote-debugging-pipe`` reads DevTools commands from its file
descriptor 3 and writes replies and events to descriptor 4, each message one JSON document
ended by a NUL byte (the transport choreographer, kaleido's driver, uses). A pipe needs no port,
no websocket client and no extra package, and it ends when the browser does, so a report never
leaves a browser behind. The browser is found the way choreographer and kaleido find it: an
explicit path, then an environment variable, then the usual names on PATH, then where the official installers
put Chrome, Chromium or Edge on Linux, macOS and Windows (``install_places``).
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path, PureWindowsPath
from types import TracebackType
from typing import Any

ENV_BROWSER = "GPUSCOPE_BROWSER"
ENV_BROWSER_ALIASES = ("BROWSER_PATH",)
"""choreographer's variable, honoured too so one setting serves both."""
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "microsoft-edge")
HOW_TO_GET_ONE = ("no Chromium found for the PDF: install Chrome or Chromium (e.g. `apt-get install chromium`), "
                  f"or pass --browser PATH, or set {ENV_BROWSER}")
_MAC_APPS = ("Google Chrome.app/Contents/MacOS/Google Chrome", "Chromium.app/Contents/MacOS/Chromium",
             "Microsoft Edge.app/Contents/MacOS/Microsoft Edge")
"""Inside /Applications or ~/Applications, where a macOS install puts each (none is on PATH)."""
_WINDOWS_APPS = (r"Google\Chrome\Application\chrome.exe", r"Chromium\Application\chrome.exe",
                 r"Microsoft\Edge\Application\msedge.exe")
"""Under %ProgramFiles%, %ProgramFiles(x86)% or %LocalAppData% (a per-user install), as the installers put them."""
_WINDOWS_ROOTS = ("ProgramFiles", "ProgramFiles(x86)", "LocalAppData")
_LINUX_PLACES = ("opt/google/chrome/chrome", "snap/bin/chromium", "opt/chromium.org/chromium/chromium")
"""Google's package and the snap link these onto PATH; a PATH without /usr/bin or /snap/bin still finds them."""
FLAGS = ("--headless", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
         "--disable-default-apps", "--mute-audio", "--hide-scrollbars", "--remote-debugging-pipe")
TIMEOUT_S = 60.0
READY = "(document.documentElement && document.documentElement.dataset.charts) || ''"
"""What a page sets on its root element once its charts are drawn ("ready") or failed ("error: ...")."""


class BrowserError(Exception):
    """No browser, or the browser failed: one line for the user."""


def find_browser(explicit: str | None = None, *, env: Mapping[str, str] | None = None,
                 platform: str = sys.platform, root: Path = Path("/"), home: Path | None = None) -> str:
    """The Chromium to drive: ``explicit``, then $GPUSCOPE_BROWSER (or $BROWSER_PATH), then PATH, then the
    standard install places of ``platform`` (``root`` and ``home`` stand for / and ~ in them)."""
    env = os.environ if env is None else env
    for candidate, origin in ((explicit, "--browser"),
                              *((env.get(v) or None, f"${v}") for v in (ENV_BROWSER, *ENV_BROWSER_ALIASES))):
        if candidate is None:
            continue
        found = shutil.which(candidate, path=env.get("PATH"))
        if found is None:
            raise BrowserError(f"{origin} {candidate}: no such executable")
        return found
    for name in NAMES:
        found = shutil.which(name, path=env.get("PATH"))
        if found is not None:
            return found
    for place in install_places(platform, env, root=root, home=Path.home() if home is None else home):
        if place.is_file() and os.access(place, os.X_OK):
            return str(place)
    raise BrowserError(HOW_TO_GET_ONE)


def install_places(platform: str, env: Mapping[str, str], *, root: Path, home: Path) -> list[Path]:
    """Where Chrome, Chromium and Edge's own installers put the browser on ``platform`` (sys.platform's names),
    in the order they are tried: Chrome wherever it is, then Chromium, then Edge."""
    if platform == "darwin":
        return [base / app for app in _MAC_APPS for base in (root / "Applications", home / "Applications")]
    if platform == "win32":
        bases = [env[name] for name in _WINDOWS_ROOTS if env.get(name)]
        return [Path(base, *PureWindowsPath(app).parts) for app in _WINDOWS_APPS for base in bases]
    return [root / place for place in _LINUX_PLACES]


class Browser:
    """One headless Chromium process; ``page()`` opens tabs in it. Use as a context manager."""

    def __init__(self, binary: str, *, timeout_s: float = TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._profile = tempfile.TemporaryDirectory(prefix="gpuscope-browser-")
        # Chromium's log goes to a file: a pipe nobody reads would fill up and stall the browser.
        self._log = tempfile.TemporaryFile()
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        flags = [*FLAGS, f"--user-data-dir={self._profile.name}"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            flags.append("--no-sandbox")  # Chromium refuses to start as root with its sandbox on
        # The shell moves our pipe ends from its stdin and stdout to the descriptors Chromium reads (3) and
        # writes (4): fixed numbers on both sides, so no descriptor of ours can collide with them.
        script = 'exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>/dev/null'
        try:
            self._process = subprocess.Popen(["/bin/sh", "-c", script, binary, *flags, "about:blank"],
                                             stdin=to_browser_r, stdout=from_browser_w, stderr=self._log)
        except OSError as exc:
            self._profile.cleanup()
            self._log.close()
            raise BrowserError(f"could not start {binary}: {exc}") from None
        finally:
            os.close(to_browser_r)
            os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        """Every event received, in order (a Page reads its own)."""
        try:
            self.version = str(self.send("Browser.getVersion").get("product", ""))
        except BrowserError as exc:
            self.close()
            raise BrowserError(f"{binary} did not start as a DevTools browser ({exc})") from None

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self.send("Browser.close", timeout_s=5.0)
            except BrowserError:
                pass
            try:
                self._process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    def page(self) -> Page:
        """A new tab, attached so that commands can be sent to it."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, str(target), str(session))

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None,
             timeout_s: float | None = None) -> dict[str, Any]:
        """Send one command and wait for its reply; a protocol error raises BrowserError."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        try:
            os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        except OSError:
            raise BrowserError(f"the browser exited{self._stderr_tail()}") from None
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            reply = self._read(deadline, method)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message', reply['error'])}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self.events.append(reply)

    def _read(self, deadline: float, waiting_for: str) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"the browser did not answer {waiting_for} in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError(f"the browser exited{self._stderr_tail()}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def _stderr_tail(self) -> str:
        try:  # the pipe closes a moment before the process is gone
            self._process.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            return ""
        self._log.seek(0)
        lines = [line for line in self._log.read().decode(errors="replace").splitlines() if line.strip()]
        return f": {lines[-1].strip()}" if lines else ""


class Page:
    """One tab: open a document, wait for its charts, print it or look at it."""

    def __init__(self, browser: Browser, target: str, session: str) -> None:
        self.browser, self.target, self.session = browser, target, session
        self._first_event = len(browser.events)

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session)

    def events(self, method: str) -> list[dict[str, Any]]:
        """This tab's events of one kind (their params), since it was opened."""
        return [e.get("params", {}) for e in self.browser.events[self._first_event:]
                if e.get("sessionId") == self.session and e.get("method") == method]

    def open(self, path: Path, *, width_px: int | None = None, print_media: bool = False,
             offline: bool = False) -> None:
        """Load a local file and wait until its charts are drawn (``<html data-charts="ready">``).

        ``width_px`` lays the page out at that width (a printed page's), ``print_media`` applies its
        print styles before the charts measure themselves, ``offline`` cuts the network and records
        every request the page makes (``events("Network.requestWillBeSent")``).
        """
        if offline:
            self.send("Network.enable")
            self.send("Network.emulateNetworkConditions", {"offline": True, "latency": 0,
                                                           "downloadThroughput": -1, "uploadThroughput": -1})
        if width_px is not None:
            self.send("Emulation.setDeviceMetricsOverride", {"width": width_px, "height": 1000,
                                                             "deviceScaleFactor": 1, "mobile": False})
        if print_media:
            self.send("Emulation.setEmulatedMedia", {"media": "print"})
        navigated = self.send("Page.navigate", {"url": path.resolve().as_uri()})
        if "errorText" in navigated:
            raise BrowserError(f"could not open {path}: {navigated['errorText']}")
        deadline = time.monotonic() + self.browser.timeout_s
        while True:
            state = self.evaluate(READY)
            if state == "ready":
                return
            if isinstance(state, str) and state.startswith("error"):
                raise BrowserError(f"{path}: the charts could not be drawn ({state})")
            if time.monotonic() > deadline:
                raise BrowserError(f"{path}: the page was not ready in {self.browser.timeout_s:g} s")
            time.sleep(0.05)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable values only)."""
        reply = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                               "awaitPromise": True})
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression}: {reply['exceptionDetails'].get('text', 'exception')}")
        return reply.get("result", {}).get("value")

    def print_pdf(self, options: dict[str, Any]) -> bytes:
        """Page.printToPDF with ``options`` (paper size, margins, header and footer templates)."""
        return base64.b64decode(self.send("Page.printToPDF", options)["data"])

    def screenshot(self, *, width_px: int, height_px: int) -> bytes:
        """A PNG of the top of the page at that size."""
        self.send("Emulation.setDeviceMetricsOverride", {"width": width_px, "height": height_px,
                                                         "deviceScaleFactor": 1, "mobile": False})
        shot = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False})
        return base64.b64decode(shot["data"])

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})
