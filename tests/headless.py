"""Open a local HTML file in headless Chromium (Debian's ``chromium`` package, never a downloaded
browser) and measure it as a reader would see it, over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: JSON messages separated by NUL on fds 3 and 4), so no websocket
package is needed.

    with HeadlessChromium() as browser:
        page = browser.open(path, width=500)
        page["first_line"], page["too_wide"], page["errors"]
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--remote-debugging-pipe")

# Every rendered element whose box leaves the viewport horizontally (zero-size boxes, such as
# the contents of closed <details>, are not rendered and not counted).
MEASURE = """(() => {
  const vw = document.documentElement.clientWidth;
  const tooWide = [];
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.left < -0.5 || r.right > vw + 0.5) {
      tooWide.push({tag: el.tagName.toLowerCase(), id: el.id, cls: String(el.className && el.className.baseVal !== undefined
                    ? el.className.baseVal : el.className), left: Math.round(r.left), right: Math.round(r.right)});
    }
  }
  const rows = [...document.querySelectorAll('table.results tr.r')];
  const closed = [...document.querySelectorAll('details:not([open]) > :not(summary)')];
  return {viewport: vw, scroll_width: document.documentElement.scrollWidth,
          first_line: document.body.innerText.trim().split('\\n')[0], too_wide: tooWide,
          visible_rows: rows.filter(r => r.getBoundingClientRect().height > 0).map(r => r.className),
          closed_details_shown: closed.filter(e => e.checkVisibility()).length,
          closed_details: closed.length};
})()"""


def chromium_binary() -> str | None:
    return shutil.which("chromium")


class HeadlessChromium:
    def __init__(self, binary: str | None = None, timeout: float = 60.0):
        self.binary = binary or chromium_binary()
        if self.binary is None:
            raise FileNotFoundError("chromium is not installed (Debian: apt-get install chromium)")
        self.timeout = timeout
        self._id = 0
        self._buf = b""
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> HeadlessChromium:
        self._profile = tempfile.mkdtemp(prefix="bias-core-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def fds() -> None:  # the protocol's fixed descriptors: the browser reads 3, writes 4
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.proc = subprocess.Popen([self.binary, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
                                     pass_fds=(3, 4), preexec_fn=fds, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        return self

    def __exit__(self, *exc: Any) -> None:
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        shutil.rmtree(self._profile, ignore_errors=True)

    # -- protocol ------------------------------------------------------------------------------
    def _read_message(self, deadline: float, waiting_for: str) -> dict[str, Any]:
        while b"\0" not in self._buf:
            # select, not a bare read: a browser that hangs silently must not block past the deadline
            ready, _, _ = select.select([self._from_child], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"chromium sent no answer to {waiting_for} within {self.timeout:.0f} s")
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise RuntimeError(f"chromium closed the pipe (exit code {self.proc.poll()})")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline, method)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, session: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        for i, ev in enumerate(self.events):
            if ev.get("method") == method and ev.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            ev = self._read_message(deadline, f"the event {method}")
            if ev.get("method") == method and ev.get("sessionId") == session:
                return ev
            self.events.append(ev)

    # -- a page --------------------------------------------------------------------------------
    def open(self, path: str | os.PathLike[str], width: int = 1280, height: int = 900, fragment: str = "",
             media: str = "screen") -> dict[str, Any]:
        """Load ``path`` at ``width`` x ``height`` CSS px (``media="print"`` applies the print
        styles); return the measurements of MEASURE plus ``errors``: console errors, uncaught
        exceptions and error log entries (failed loads)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=session)
        self.send("Emulation.setEmulatedMedia", {"media": media}, session=session)
        url = Path(path).resolve().as_uri() + (f"#{fragment}" if fragment else "")
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_for("Page.loadEventFired", session)
        if fragment:  # let :target styles apply
            self.send("Runtime.evaluate", {"expression": "new Promise(r => requestAnimationFrame(() => r(1)))",
                                           "awaitPromise": True}, session=session)
        result = self.send("Runtime.evaluate", {"expression": MEASURE, "returnByValue": True}, session=session)
        page = dict(result["result"]["value"])
        errors = []
        for ev in self.events:
            if ev.get("sessionId") != session:
                continue
            p = ev.get("params", {})
            if ev.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(str(p.get("args")))
            elif ev.get("method") == "Runtime.exceptionThrown":
                errors.append(str(p.get("exceptionDetails")))
            elif ev.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                errors.append(str(p["entry"].get("text")))
        page["errors"] = errors
        self.send("Target.closeTarget", {"targetId": target})
        return page
