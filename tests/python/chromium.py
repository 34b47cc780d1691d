"""A headless Chromium for the tests, driven over the DevTools protocol on a pipe.

Chromium started with `--remote-debugging-pipe` reads protocol messages (JSON, each ended by
a NUL byte) on its file descriptor 3 and writes its answers and events on 4: no driver
binary, no WebSocket library, no port. `Chromium` opens one page and keeps every event it
sees (console messages, exceptions, network requests) for the test to inspect.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

#: Names of the Chromium binary, tried in order (Debian's package installs `chromium`).
BINARIES = ("chromium", "chromium-browser", "google-chrome", "chrome")

#: Longest wait for one answer or event before the test fails (a guard against a hung
#: browser, not a measure of speed).
DEADLINE_SECONDS = 60.0


def find_binary() -> str | None:
    """The Chromium binary: `$CHROMIUM`, else the first of `BINARIES` on the PATH."""
    return os.environ.get("CHROMIUM") or next(filter(None, map(shutil.which, BINARIES)), None)


class Chromium:
    """One headless Chromium with one page; `close` (or a `with` block) ends it."""

    def __init__(self, binary: str, profile: Path, *, width: int = 1280, height: int = 900) -> None:
        """Starts the browser with a fresh profile in `profile` and opens a blank page."""
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()

        def on_fds_3_and_4() -> None:
            # Moved out of the way first, so that neither dup2 overwrites the other's source.
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child, from_child)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        arguments = [
            binary,
            "--headless",
            "--remote-debugging-pipe",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            f"--user-data-dir={profile}",
            "about:blank",
        ]
        if os.geteuid() == 0:
            arguments.insert(1, "--no-sandbox")  # Chromium refuses to run as root with it
        self.process = subprocess.Popen(
            arguments,
            pass_fds=(3, 4),
            preexec_fn=on_fds_3_and_4,  # safe: the tests start no threads
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.call("Emulation.setDeviceMetricsOverride", metrics, session=True)

    def __enter__(self) -> Chromium:
        """The browser itself."""
        return self

    def __exit__(self, *_: object) -> None:
        """Ends the browser."""
        self.close()

    def close(self) -> None:
        """Ends the browser process and closes the pipes."""
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, session: bool = False
    ) -> dict[str, Any]:
        """Sends a protocol command (to the page if `session`) and returns its result."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for_event(self, method: str) -> dict[str, Any]:
        """The first event `method` (already seen or the next to come)."""
        index = 0
        while True:
            for event in self.events[index:]:
                if event.get("method") == method:
                    return event
            index = len(self.events)
            self.events.append(self._receive())

    def open(self, url: str) -> None:
        """Loads `url` in the page and waits for its load event."""
        self.call("Page.navigate", {"url": url}, session=True)
        self.wait_for_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited if a promise)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=True,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:60]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def poll(self, expression: str, *, until: Any) -> Any:
        """Evaluates `expression` until `until(value)` holds (or the deadline); the value."""
        deadline = time.monotonic() + DEADLINE_SECONDS
        while True:
            value = self.evaluate(expression)
            if until(value) or time.monotonic() > deadline:
                return value
            time.sleep(0.1)

    def click(self, selector: str) -> None:
        """Clicks the middle of the first element matching `selector`, as a mouse would."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1},
                session=True,
            )

    def type_into(self, selector: str, text: str) -> None:
        """Focuses the element matching `selector` and types `text` into it."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", {"text": text}, session=True)

    def screenshot(self, path: Path) -> bytes:
        """A PNG of the whole page (beyond the window), written to `path`; its bytes."""
        size = self.call("Page.getLayoutMetrics", session=True)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = self.call(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True, "clip": clip},
            session=True,
        )
        data = base64.b64decode(shot["data"])
        path.write_bytes(data)
        return data

    def console_errors(self) -> list[str]:
        """Errors the page reported: console errors, uncaught exceptions, failed loads."""
        errors = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a)) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                errors.append(str(params["exceptionDetails"]))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                errors.append(params["entry"]["text"])
            elif method == "Network.loadingFailed":
                errors.append(f"loading failed: {params.get('errorText')}")
        return errors

    def requested_urls(self) -> list[str]:
        """Every URL the page requested."""
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def _receive(self) -> dict[str, Any]:
        """The next message from the browser."""
        deadline = time.monotonic() + DEADLINE_SECONDS
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self._read], [], [], max(remaining, 0))
            if not ready:
                raise TimeoutError(f"Chromium sent nothing for {DEADLINE_SECONDS} s")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium exited (status {self.process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)
