"""A headless Chromium driven through the DevTools protocol, for the report's page test.

``open_in_chromium(path)`` loads a local file in a fresh headless Chromium (its own profile in a
temporary directory, the DevTools endpoint on loopback, port chosen by the browser) and returns a
:class:`Loaded`: every network request the page made, its console errors and uncaught exceptions,
a way to evaluate JS in it (``evaluate``) and to take a screenshot. Every wait has a deadline; the
browser is killed when the test ends, whatever happened. Without Chromium (Debian's ``chromium``;
``.ci/run`` installs it) or websocket-client the test skips, saying which is missing.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

START_SECONDS = 30  # Chromium up and its DevToolsActivePort written
CALL_SECONDS = 30  # one DevTools command answered
LOAD_SECONDS = 30  # the page's load event


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class DevTools:
    """One DevTools websocket: commands answered by id, events kept in order."""

    def __init__(self, socket: Any):
        self.socket = socket
        self.events: list[dict] = []
        self._next = 0

    def _receive(self, deadline: float) -> dict:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no answer from Chromium in time")
        self.socket.settimeout(remaining)
        return json.loads(self.socket.recv())

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = CALL_SECONDS) -> dict:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        deadline = time.monotonic() + timeout
        while True:
            data = self._receive(deadline)
            if data.get("id") == self._next:
                if "error" in data:
                    raise RuntimeError(f"{method}: {data['error']}")
                return data.get("result", {})
            if "method" in data:
                self.events.append(data)

    def wait_for(self, method: str, session: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event["method"] == method and event.get("sessionId") == session:
                    return event
            seen = len(self.events)
            data = self._receive(deadline)
            if "method" in data:
                self.events.append(data)


@dataclass
class Loaded:
    """A page loaded in Chromium: what it requested and reported, and the session to query it."""

    url: str
    devtools: DevTools
    session: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def collect(self) -> None:
        """Requests, console errors and exceptions among the events so far."""
        self.requests.clear()
        self.errors.clear()
        for event in self.devtools.events:
            if event.get("sessionId") != self.session:
                continue
            method, params = event["method"], event.get("params", {})
            if method == "Network.requestWillBeSent":
                self.requests.append(params["request"]["url"])
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                thrown = details.get("exception", {}).get("description")
                self.errors.append(f"exception: {details.get('text')} {thrown}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                self.errors.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                          for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                self.errors.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}")

    def evaluate(self, expression: str) -> Any:
        """The JSON-able value of a JS expression in the page."""
        result = self.devtools.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                         "awaitPromise": True}, self.session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"JS failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, full_page: bool = False) -> bytes:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.devtools.call("Page.getLayoutMetrics", session=self.session)["cssContentSize"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        data = self.devtools.call("Page.captureScreenshot", params, self.session, timeout=60)["data"]
        return base64.b64decode(data)


def _devtools_endpoint(profile: Path, process: subprocess.Popen) -> str:
    """ws://127.0.0.1:PORT/devtools/browser/ID from the profile's DevToolsActivePort file."""
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"Chromium exited with status {process.returncode} before listening")
        with contextlib.suppress(OSError):
            lines = port_file.read_text().split()
            if len(lines) >= 2:
                return f"ws://127.0.0.1:{int(lines[0])}{lines[1]}"
        time.sleep(0.05)
    raise TimeoutError(f"Chromium wrote no {port_file} within {START_SECONDS} s")


@pytest.fixture
def open_in_chromium():
    """``open_in_chromium(path, width=1280, height=900) -> Loaded``; the browser is killed after
    the test."""
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no chromium or chromium-browser on PATH (Debian: apt-get install chromium; .ci/run does)")
    websocket = pytest.importorskip("websocket", reason="websocket-client (the [test] extra) drives Chromium")
    processes: list[subprocess.Popen] = []
    sockets: list[Any] = []
    profiles: list[str] = []

    def open_page(path: str | os.PathLike, width: int = 1280, height: int = 900) -> Loaded:
        profile = Path(tempfile.mkdtemp(prefix="rapidscore-chromium-"))
        profiles.append(str(profile))
        process = subprocess.Popen(
            [binary, "--headless=new", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
             f"--user-data-dir={profile}", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
             "--mute-audio", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            start_new_session=True)  # its own process group: its helpers are ended with it
        processes.append(process)
        socket = websocket.create_connection(_devtools_endpoint(profile, process), timeout=CALL_SECONDS,
                                             suppress_origin=True)
        sockets.append(socket)
        devtools = DevTools(socket)
        target = devtools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = devtools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Network", "Runtime", "Log", "Page"):
            devtools.call(f"{domain}.enable", session=session)
        devtools.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                             "deviceScaleFactor": 1, "mobile": False}, session)
        url = Path(path).resolve().as_uri()
        devtools.call("Page.navigate", {"url": url}, session)
        devtools.wait_for("Page.loadEventFired", session, LOAD_SECONDS)
        loaded = Loaded(url, devtools, session)
        loaded.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")  # painted
        loaded.collect()
        return loaded

    try:
        yield open_page
    finally:
        for socket in sockets:
            with contextlib.suppress(Exception):
                socket.close()
        for process in processes:  # the browser and its helpers: the group it leads
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        for profile in profiles:
            shutil.rmtree(profile, ignore_errors=True)
