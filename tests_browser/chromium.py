"""Headless Chromium driven over the DevTools protocol, to look at the built book as a reader does.

One browser per test session (flags below: no sandbox for root, no GPU, and none of the background
connections Chromium makes by itself, so it runs on a machine without network) and one fresh tab
per page.  :meth:`Chromium.open` loads a ``file://`` page, waits for it, runs a JavaScript check
in it, and returns the check's result with everything the page requested over the network and
every uncaught JavaScript exception.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import websocket  # websocket-client

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--hide-scrollbars",
    "--window-size=1280,1600",
]


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise RuntimeError("no Chromium found: install it (Debian: apt-get install -y chromium); .ci/run does")


@dataclass
class PageVisit:
    url: str
    result: dict
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    failed: list[str] = field(default_factory=list)  # requests that failed, with the reason
    exceptions: list[str] = field(default_factory=list)  # uncaught JavaScript exceptions


class Chromium:
    def __init__(self, binary: str | None = None, timeout: float = 60.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="book-chromium-")  # a fresh --user-data-dir
        self.log = open(Path(self.profile, "chromium.log"), "wb")
        self.proc = subprocess.Popen(
            [binary or find_chromium(), *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             "about:blank"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        # Chromium writes the port it chose and the browser's endpoint to DevToolsActivePort
        port_file, deadline = Path(self.profile, "DevToolsActivePort"), time.monotonic() + timeout
        while not (port_file.exists() and len(port_file.read_text().split()) == 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"Chromium did not start; see its log in {self.log.name}")
            time.sleep(0.1)
        port, path = port_file.read_text().split()
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=timeout, suppress_origin=True)
        self._id = 0
        self._events: list[dict] = []

    # -- the protocol: one connection to the browser, one flat session per tab
    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        while True:
            reply = self._receive(time.monotonic() + self.timeout)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def _receive(self, deadline: float) -> dict:
        self.ws.settimeout(max(0.1, deadline - time.monotonic()))
        return json.loads(self.ws.recv())

    def wait_for(self, method: str, session: str) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, ev in enumerate(self._events):
                if ev.get("method") == method and ev.get("sessionId") == session:
                    del self._events[i]
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} within {self.timeout} s")
            self._events.append(self._receive(deadline))

    def open(self, url: str, check_js: str, screenshot: Path | None = None) -> PageVisit:
        """Load ``url`` in a new tab, evaluate ``check_js`` (an expression giving a promise of JSON)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            for domain in ("Page", "Network", "Runtime"):
                self.send(f"{domain}.enable", session=session)
            self.send("Page.navigate", {"url": url}, session=session)
            self.wait_for("Page.loadEventFired", session)
            value = self.send(
                "Runtime.evaluate",
                {"expression": check_js, "awaitPromise": True, "returnByValue": True, "timeout": self.timeout * 1000},
                session=session,
            )
            if "exceptionDetails" in value:
                raise RuntimeError(f"the page check failed on {url}: {value['exceptionDetails']}")
            visit = PageVisit(url, json.loads(value["result"]["value"]))
            if screenshot is not None:
                self._screenshot(session, screenshot)
        finally:
            self.send("Target.closeTarget", {"targetId": target})
        mine = [ev for ev in self._events if ev.get("sessionId") == session]
        self._events = [ev for ev in self._events if ev.get("sessionId") != session]
        urls = {}
        for ev in mine:
            p = ev.get("params", {})
            if ev["method"] == "Network.requestWillBeSent":
                visit.requests.append(p["request"]["url"])
                urls[p["requestId"]] = p["request"]["url"]
            elif ev["method"] == "Network.loadingFailed" and not p.get("canceled"):
                visit.failed.append(f"{urls.get(p.get('requestId'), '?')}: {p.get('errorText')}")
            elif ev["method"] == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                visit.exceptions.append(d.get("exception", {}).get("description") or d.get("text", "?"))
        return visit

    def _screenshot(self, session: str, path: Path) -> None:
        """The whole page as a PNG (up to 12000 px tall), as a 1280 px wide window shows it."""
        import base64

        height = self.send("Page.getLayoutMetrics", session=session)["cssContentSize"]["height"]
        metrics = {"width": 1280, "height": int(min(height, 12000)), "deviceScaleFactor": 1, "mobile": False}
        self.send("Emulation.setDeviceMetricsOverride", metrics, session=session)
        shot = self.send("Page.captureScreenshot", {"format": "png"}, session=session)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        if getattr(self, "ws", None) is not None:
            try:
                self.send("Browser.close")
            except Exception:
                pass
            self.ws.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
