"""A headless Chromium (Debian's `chromium`) driven over the Chrome DevTools Protocol, for the report's browser tests.

Why CDP over one websocket (websocket-client, locked in requirements/dev.lock) rather than Selenium + chromedriver:
what the tests assert are protocol events — every request the page makes (Network.requestWillBeSent), every console
message and uncaught exception (Runtime.consoleAPICalled, Runtime.exceptionThrown, Log.entryAdded) — and the
viewport (Emulation.setDeviceMetricsOverride) and screenshots (Page.captureScreenshot); WebDriver reaches these only
through vendor logging preferences or a CDP pass-through. One small, pure-Python, dependency-free client instead of
Selenium and its dozen dependencies (trio, urllib3, certifi, …) and a second binary (chromedriver) to keep in step
with the browser.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def browser_binary() -> str | None:
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless Chromium with one page; `open(url, width, height)` loads a page and collects its events."""

    def __init__(self, binary: str) -> None:
        import websocket  # websocket-client

        self.profile = tempfile.mkdtemp(prefix="helm-nemo-chromium-")
        self.proc = subprocess.Popen(
            [
                binary,
                "--headless=new",
                "--no-sandbox",  # root in a container: Chromium's sandbox needs user namespaces
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-default-apps",
                "--disable-extensions",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"chromium did not start (exit {self.proc.poll()})")
            time.sleep(0.1)
        port, path = port_file.read_text().split("\n")[:2]
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: bool = False) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        self.ws.send(json.dumps(message))
        while True:
            answer = json.loads(self.ws.recv())
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result") or {}
            if "method" in answer:
                self.events.append(answer)

    def wait_for(self, method: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events:
                if event["method"] == method:
                    return event
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            answer = json.loads(self.ws.recv())
            if "method" in answer:
                self.events.append(answer)
        raise TimeoutError(method)

    def open(self, url: str, width: int, height: int, mobile: bool = False) -> None:
        self.events.clear()
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
            session=True,
        )
        self.call("Page.navigate", {"url": url}, session=True)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}, session=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def errors(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, and the browser's own error log entries (a refused
        load, a blocked resource, a CSP violation)."""
        found = []
        for event in self.events:
            method, params = event["method"], event.get("params") or {}
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                found.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") in ("error", "warning"):
                found.append(f"log {params['entry'].get('source')}: {params['entry'].get('text')}")
        return found

    def screenshot(self, path: Path, full_page: bool = True) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = self.call("Page.getLayoutMetrics", session=True)
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", params, session=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            try:
                ws.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def artifacts(tmp_path: Path) -> Path:
    """Where screenshots go: $HELM_NEMO_ARTIFACTS when set (kept after the run), else the test's tmp folder."""
    folder = Path(os.environ["HELM_NEMO_ARTIFACTS"]) if os.environ.get("HELM_NEMO_ARTIFACTS") else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# What the page must show, read in the page: each chart's marks, axis names and the marks of the stall and cause.
CHECKS_JS = r"""
(() => {
  const charts = [...document.querySelectorAll('svg[data-chart]')].map(svg => {
    const box = svg.getBoundingClientRect();
    const scale = box.width / svg.viewBox.baseVal.width;
    const series = {};
    for (const g of svg.querySelectorAll('g[data-series]')) {
      const path = [...g.querySelectorAll('path')].map(p => (p.getAttribute('d') || '').split(/[ML]/).length - 1)
        .reduce((a, b) => a + b, 0);
      series[g.dataset.series] = {points: path, dots: g.querySelectorAll('circle').length,
                                  box: g.getBBox ? [g.getBBox().width, g.getBBox().height] : null};
    }
    const axisName = side => { const t = svg.querySelector(`g.axis.${side} > text`); return t ? t.textContent : ''; };
    const fonts = [...svg.querySelectorAll('text')].map(t => parseFloat(getComputedStyle(t).fontSize) * scale);
    return {key: svg.dataset.chart, width: box.width, height: box.height, series,
            x: axisName('bottom'), y: axisName('left'),
            ticks: svg.querySelectorAll('g.tick').length, smallest_font: Math.min(...fonts)};
  });
  const cause = document.querySelector('[data-cause]');
  const link = cause ? cause.querySelector('a[href^="#"]') : null;
  const texts = [...document.querySelectorAll('main p, main td, main div.note, main .verdict')]
    .map(e => parseFloat(getComputedStyle(e).fontSize));
  return {charts, cause: cause ? cause.dataset.cause : null,
          cause_link: link ? link.getAttribute('href') : null,
          cause_target: link ? !!document.querySelector(link.getAttribute('href')) : false,
          stalls: document.querySelectorAll('.stall').length,
          lanes: document.querySelectorAll('.lane').length,
          page_width: document.documentElement.scrollWidth, view_width: window.innerWidth,
          verdict_overflow: (s => s ? s.scrollWidth - s.clientWidth : 0)(document.querySelector('#verdict .scroll')),
          smallest_text: Math.min(...texts),
          scripts: document.scripts.length,
          external: [...document.querySelectorAll('[src], link[href]')].map(e => e.src || e.href)};
})()
"""


# --------------------------------------------------------------------------------------------------
# The tests


ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "tests/logs/real/gpu"
PUBLIC = ROOT / "tests/logs/real/public"
SIZES = {"desktop": (1280, 800, False), "phone": (390, 844, True)}
# (case, the logs, values) -> what the page must hold
CASES = {
    "hang": ([GPU / "hang"], None),
    "cuda-oom": ([GPU / "cuda-oom"], None),
    "healthy-2node": ([GPU / "healthy-2node"], ROOT / "values/examples/a3mega-gpt3-175b.yaml"),
    "megatron-mixtral": ([PUBLIC / "megatron-lm-756-healthy-mixtral-h100/log.txt"], None),
}


@pytest.fixture(scope="module")
def browser():
    binary = browser_binary()
    if binary is None:
        pytest.skip(
            "no chromium: the browser tests need Debian's chromium (scripts/setup.sh installs it with "
            "WITH_BROWSER=1, as make test asks)"
        )
    try:
        import websocket  # noqa: F401
    except ImportError:
        pytest.skip("websocket-client is not installed (requirements/dev.lock has it: run make setup)")
    chrome = Browser(binary)
    yield chrome
    chrome.close()


def make_report(tmp_path: Path, case: str) -> tuple[Path, Any]:
    from helm_nemo.report.gather import from_files
    from helm_nemo.report.render import html
    from helm_nemo.status.progress import run_inputs

    paths, values = CASES[case]
    run = run_inputs(str(values)) if values else None
    report = from_files([str(p) for p in paths], run=run)
    out = tmp_path / f"{case}.html"
    out.write_text(html(report), encoding="utf-8")
    return out, report


def check_page(chrome: Browser, page: Path, report: Any, size: str, shots: Path, name: str) -> dict[str, Any]:
    width, height, mobile = SIZES[size]
    url = page.resolve().as_uri()
    chrome.open(url, width, height, mobile)
    found = chrome.evaluate(CHECKS_JS)
    shot = shots / f"{name}-{size}.png"
    chrome.screenshot(shot)
    assert shot.stat().st_size > 10_000, shot
    # nothing fetched: the page itself is the only request, no script, no external reference
    assert chrome.requests() == [url], chrome.requests()
    assert chrome.errors() == [], chrome.errors()
    assert found["scripts"] == 0 and found["external"] == [], found
    # readable: nothing wider than the screen, body text and every chart's text at a readable size
    assert found["page_width"] <= found["view_width"], found
    assert found["verdict_overflow"] <= 0, found  # the verdict's lines wrap instead of scrolling sideways
    assert found["smallest_text"] >= 12, found
    charts = {c["key"]: c for c in found["charts"]}
    from helm_nemo.report.charts import figures

    expected = {f"{key}-{axis}" for key, *_ in figures(report) for axis in ("step", "time")}
    assert set(charts) == expected, (sorted(charts), sorted(expected))
    for key, chart in charts.items():
        metric = key.rsplit("-", 1)[0]
        assert chart["series"][metric]["points"] >= 2, (key, chart)  # the curve is drawn
        assert chart["x"] and chart["y"], (key, chart)  # axes named
        assert chart["ticks"] >= 4, (key, chart)
        assert chart["width"] >= 300 and chart["height"] >= 150, (key, chart)
        assert chart["smallest_font"] >= 9.5, (key, chart)
        if report.diagnosis.cause is not None and report.diagnosis.cause.at:
            assert chart["series"]["cause"]["points"] == 2, (key, chart)  # the first cause's line
    if report.stalls:
        for key in ("step-time-step", "step-time-time"):
            assert charts[key]["series"]["stall"]["dots"] == len(report.stalls), charts[key]
        assert found["stalls"] == len(report.stalls)
    if report.diagnosis.cause is not None:
        cause = report.diagnosis.cause
        assert found["cause"] == (cause.klass or cause.signature)
        assert found["cause_link"] == "#ev0" and found["cause_target"], found
    assert found["lanes"] == len(report.pods)
    return found


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_report_in_a_real_browser(browser, tmp_path, case, size):
    page, report = make_report(tmp_path, case)
    check_page(browser, page, report, size, artifacts(tmp_path), case)


def test_the_hang_report_marks_its_stall_and_first_cause(browser, tmp_path):
    """The real hang: rank 1 stopped at step 30; rank 0 waited 90 s for step 30 and its watchdog fired first."""
    page, report = make_report(tmp_path, "hang")
    assert [(s.step, s.after, round(s.seconds)) for s in report.stalls] == [(29, 30, 90)]
    found = check_page(browser, page, report, "desktop", artifacts(tmp_path), "hang-marks")
    assert found["cause"] == "nccl-timeout"
    chart = next(c for c in found["charts"] if c["key"] == "step-time-step")
    assert chart["series"]["stall"]["dots"] == 1 and chart["series"]["median"]["points"] == 2
