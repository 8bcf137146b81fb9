"""Drives an upload link's page in a real (headless) Chromium, the way a person would: picks a
file with the labelled file input and presses Upload, or drops a file on the drop zone. Reports
what the page showed as one JSON object on stdout; diagnostics go to stderr.

    python upload_browser.py --url https://host/links/TOKEN --file /tmp/x.csv --mode picker \
        [--throttle-kbps 2000] [--screenshot out.png] [--timeout 120]

Exit status 0 when the page reached `done`, 1 otherwise.

What it relies on in the page (src/links/page/upload.html and upload.js):
  body[data-state]            idle | uploading | done | failed, set once the page script runs
  body[data-progress-events]  distinct percent values the upload reported
  body[data-max-progress]     the highest percent reached
  body[data-selected]         the name of the file last chosen or dropped
  a <label> whose text says to choose a file, its `for` naming the <input type=file>
  a submit button whose text says Upload
  #dropzone (role=button, tabindex=0), #progress (<progress>), #status (role=status),
  #error (role=alert), #result (a <dl> with data-name/-size/-sha256/-uri after success)

A file picked with the input waits for the Upload button; a dropped file is sent at once.

Other scripts import it: `run` (what the command line does, returning the report), `visit`
(what a page shows when only opened: an error page, say) and `CHROMIUM`/`CHROMEDRIVER`, the
paths used by default (tests/python/upload_page.py).
"""

import argparse
import base64
import json
import os
import sys
import time

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys


# The browser and its driver (Debian's chromium and chromium-driver), unless the environment
# names others.
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")


def log(*parts):
    print("upload_browser:", *parts, file=sys.stderr, flush=True)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the upload link")
    parser.add_argument("--file", required=True, help="the file to upload")
    parser.add_argument("--mode", choices=["picker", "drop"], required=True)
    parser.add_argument("--throttle-kbps", type=float, default=None,
                        help="emulated upload speed in kilobits per second")
    parser.add_argument("--screenshot", default=None, help="write a PNG of the page when finished")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds to wait for the upload to finish")
    parser.add_argument("--drop-via", choices=["auto", "cdp", "js"], default="auto",
                        help="drop mode: a CDP drag (falling back to script), or only one way")
    parser.add_argument("--chromium", default=CHROMIUM)
    parser.add_argument("--chromedriver", default=CHROMEDRIVER)
    return parser.parse_args()


def make_driver(chromium=CHROMIUM, chromedriver=CHROMEDRIVER):
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1000,900",
        "--lang=en-US",
        "--no-first-run",
        "--no-default-browser-check",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=chromedriver)
    return webdriver.Chrome(service=service, options=options)


def throttle(driver, kbps):
    """Emulated network conditions; what Chromium accepted, and the error if it refused."""
    upload_bps = int(kbps * 1024 / 8)
    conditions = {
        "offline": False,
        "latency": 20,
        "downloadThroughput": -1,
        "uploadThroughput": upload_bps,
    }
    try:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", conditions)
        log(f"throttling uploads to {upload_bps} bytes/s")
        return {"applied": True, "upload_bytes_per_second": upload_bps}
    except WebDriverException as e:
        log(f"throttling refused: {e.msg}")
        return {"applied": False, "upload_bytes_per_second": upload_bps, "error": e.msg}


def page_state(driver):
    return driver.execute_script("return document.body ? document.body.dataset.state || null : null;")


def wait_for_script(driver, seconds=15.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if page_state(driver):
            return True
        time.sleep(0.1)
    return False


ACCESSIBILITY_JS = """
function text(el) { return el ? (el.textContent || '').trim() : ''; }
function labelled(el) {
  if (!el) return false;
  if (el.labels && Array.prototype.some.call(el.labels, function (l) { return text(l) !== ''; })) return true;
  if ((el.getAttribute('aria-label') || '').trim() !== '') return true;
  var ids = (el.getAttribute('aria-labelledby') || '').split(/\\s+/).filter(Boolean);
  return ids.some(function (id) { return text(document.getElementById(id)) !== ''; });
}
var input = document.querySelector('input[type=file]#file') || document.querySelector('input[type=file]');
var zone = document.getElementById('dropzone');
var progress = document.getElementById('progress') || document.querySelector('progress');
var status = document.getElementById('status');
return {
  input_labelled: labelled(input),
  dropzone_role_button: !!zone && zone.getAttribute('role') === 'button',
  dropzone_tabindex: zone ? zone.tabIndex : null,
  dropzone_described: !!zone && (zone.getAttribute('aria-describedby') || '').trim() !== '',
  progress_labelled: labelled(progress),
  live_region: !!status && (status.getAttribute('role') === 'status' ||
      ['polite', 'assertive'].indexOf(status.getAttribute('aria-live')) >= 0),
};
"""


def tab_reaches_dropzone(driver, presses=20):
    """Whether pressing Tab from the top of the page reaches the drop zone."""
    driver.execute_script(
        "if (document.activeElement && document.activeElement.blur) document.activeElement.blur();"
        "window.scrollTo(0, 0);"
    )
    for _ in range(presses):
        ActionChains(driver).send_keys(Keys.TAB).perform()
        focused = driver.execute_script(
            "var a = document.activeElement; return a ? a.id || a.tagName : null;"
        )
        if focused == "dropzone":
            return True
    return False


def find_file_input(driver):
    """The file input, found the way a person would: by the label that says to choose a file."""
    for label in driver.find_elements(By.TAG_NAME, "label"):
        words = label.text.lower()
        if "file" in words and any(w in words for w in ("choose", "select", "pick")):
            target = label.get_attribute("for")
            if target:
                log(f"file input found by its label {label.text!r} -> #{target}")
                return driver.find_element(By.ID, target)
    raise RuntimeError("no <label for> that says to choose a file")


def find_upload_button(driver):
    for button in driver.find_elements(By.CSS_SELECTOR, "button, input[type=submit]"):
        name = (button.text or button.get_attribute("value") or button.get_attribute("aria-label") or "")
        kind = (button.get_attribute("type") or "submit").lower()
        if "upload" in name.lower() and kind == "submit":
            return button
    raise RuntimeError("no submit button whose text says Upload")


def pick(driver, path):
    find_file_input(driver).send_keys(path)
    time.sleep(0.3)
    state = page_state(driver)
    if state == "idle":
        find_upload_button(driver).click()
        log("chose the file and pressed Upload")
    else:
        log(f"after choosing the file the page is {state!r}; not pressing Upload")


def dropzone_centre(driver):
    return driver.execute_script(
        "var z = document.getElementById('dropzone');"
        "z.scrollIntoView({block: 'center'});"
        "var r = z.getBoundingClientRect();"
        "return {x: r.left + r.width / 2, y: r.top + r.height / 2};"
    )


def drop_arrived(driver, name, seconds=3.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen = driver.execute_script(
            "return {selected: document.body.dataset.selected || null,"
            " state: document.body.dataset.state || null};"
        )
        if seen["selected"] == name or seen["state"] not in ("idle", None):
            return True
        time.sleep(0.1)
    return False


def drop_via_cdp(driver, path):
    centre = dropzone_centre(driver)
    data = {"items": [], "files": [path], "dragOperationsMask": 1}
    for kind in ("dragEnter", "dragOver", "drop"):
        driver.execute_cdp_cmd(
            "Input.dispatchDragEvent",
            {"type": kind, "x": centre["x"], "y": centre["y"], "data": data},
        )


DROP_JS = """
var source = document.getElementById('__upload_browser_source');
var zone = document.getElementById('dropzone');
var dt = new DataTransfer();
dt.items.add(source.files[0]);
var r = zone.getBoundingClientRect();
var at = {clientX: r.left + r.width / 2, clientY: r.top + r.height / 2};
['dragenter', 'dragover', 'drop'].forEach(function (type) {
  zone.dispatchEvent(new DragEvent(type, Object.assign(
    {bubbles: true, cancelable: true, composed: true, dataTransfer: dt}, at)));
});
source.remove();
"""


def drop_via_js(driver, path):
    driver.execute_script(
        "var i = document.createElement('input');"
        "i.type = 'file'; i.id = '__upload_browser_source'; i.hidden = true;"
        "document.body.appendChild(i);"
    )
    driver.find_element(By.ID, "__upload_browser_source").send_keys(path)
    driver.execute_script(DROP_JS)


def drop(driver, path, via="auto"):
    name = os.path.basename(path)
    if via in ("auto", "cdp"):
        try:
            drop_via_cdp(driver, path)
            if drop_arrived(driver, name):
                log("the file arrived by a CDP drag and drop")
                return "cdp"
            log("a CDP drop did not deliver the file")
        except WebDriverException as e:
            log(f"a CDP drop failed ({e.msg})")
        if via == "cdp":
            return "none"
        log("dropping the file from script instead")
    drop_via_js(driver, path)
    if not drop_arrived(driver, name):
        log("the script drop did not deliver the file either")
    return "js"


POLL_JS = """
var p = document.getElementById('progress');
return {
  state: document.body.dataset.state || null,
  value: p && p.hasAttribute('value') ? p.value : null,
};
"""


def wait_for_end(driver, timeout):
    """Polls the page until it is done or failed; the distinct progress values seen meanwhile."""
    seen = []
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        snapshot = driver.execute_script(POLL_JS)
        state = snapshot["state"]
        value = snapshot["value"]
        if value is not None and 0 < value < 100:
            value = int(value) if float(value).is_integer() else value
            if value not in seen:
                seen.append(value)
        if state in ("done", "failed"):
            return state, seen
        time.sleep(0.1)
    return "timeout" if state in (None, "idle", "uploading") else state, seen


READ_JS = """
var r = document.getElementById('result');
var alertBox = document.getElementById('error') || document.querySelector('[role=alert]');
var status = document.getElementById('status');
var d = document.body.dataset;
function int(v) { var n = parseInt(v, 10); return isNaN(n) ? null : n; }
var result = null;
if (r && !r.hidden && r.dataset.name) {
  result = {name: r.dataset.name, size: int(r.dataset.size), sha256: r.dataset.sha256 || '',
            uri: r.dataset.uri || ''};
}
return {
  result: result,
  error: alertBox ? (alertBox.textContent || '').trim() : '',
  status_text: status ? (status.textContent || '').trim() : '',
  progress_events: int(d.progressEvents),
  max_progress: int(d.maxProgress),
};
"""


def screenshot(driver, path):
    """The whole page, not only the window, as a PNG."""
    try:
        metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
        })
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
    except WebDriverException as e:
        log(f"full-page screenshot failed ({e.msg}); saving the window only")
        driver.save_screenshot(path)
    log(f"screenshot written to {path}")


def run(url, file, mode, throttle_kbps=None, screenshot_path=None, timeout=120.0, drop_via="auto",
        chromium=CHROMIUM, chromedriver=CHROMEDRIVER):
    """Opens `url`, sends `file` by `mode` ("picker" or "drop") and reports what the page showed
    (the JSON object the command line prints)."""
    path = os.path.abspath(file)
    report = {
        "state": None,
        "result": None,
        "error": "",
        "progress_seen": [],
        "progress_events": None,
        "max_progress": None,
        "status_text": "",
        "drop_via": None,
        "accessibility": {
            "input_labelled": False,
            "dropzone_focusable": False,
            "progress_labelled": False,
            "live_region": False,
        },
        "mode": mode,
        "throttle": None,
    }
    driver = None
    started = time.monotonic()
    try:
        if not os.path.isfile(path):
            raise RuntimeError(f"no such file: {path}")
        driver = make_driver(chromium, chromedriver)
        report["browser"] = driver.capabilities.get("browserVersion")
        if throttle_kbps:
            report["throttle"] = throttle(driver, throttle_kbps)
        driver.get(url)
        if not wait_for_script(driver):
            report["state"] = "no-script"
            raise RuntimeError("the page's script never set body[data-state]")

        checks = driver.execute_script(ACCESSIBILITY_JS)
        tab = tab_reaches_dropzone(driver)
        report["accessibility"] = {
            "input_labelled": bool(checks["input_labelled"]),
            "dropzone_focusable": bool(checks["dropzone_role_button"] and checks["dropzone_tabindex"] == 0
                                       and tab),
            "progress_labelled": bool(checks["progress_labelled"]),
            "live_region": bool(checks["live_region"]),
        }
        report["accessibility_details"] = dict(checks, dropzone_reached_by_tab=tab)

        started = time.monotonic()
        if mode == "picker":
            pick(driver, path)
        else:
            report["drop_via"] = drop(driver, path, drop_via)

        state, seen = wait_for_end(driver, timeout)
        report["elapsed_seconds"] = round(time.monotonic() - started, 3)
        report["state"] = state
        report["progress_seen"] = seen
        report.update(driver.execute_script(READ_JS))
        # The live region counts only if it said something by the end.
        report["accessibility"]["live_region"] = (
            report["accessibility"]["live_region"] and report["status_text"] != ""
        )
        if screenshot_path:
            screenshot(driver, screenshot_path)
    except Exception as e:  # the report still goes out, saying what went wrong
        log(f"error: {type(e).__name__}: {e}")
        report["script_error"] = f"{type(e).__name__}: {e}"
        if report["state"] is None:
            report["state"] = "error"
    finally:
        quit_driver(driver)
    return report


VISIT_JS = """
function text(el) { return el ? (el.textContent || '').trim() : ''; }
var nav = performance.getEntriesByType('navigation')[0];
return {
  status: nav && typeof nav.responseStatus === 'number' ? nav.responseStatus : null,
  title: document.title,
  heading: text(document.querySelector('h1')),
  error: text(document.getElementById('error') || document.querySelector('[role=alert]')),
  state: document.body ? document.body.dataset.state || null : null,
  has_file_input: !!document.querySelector('input[type=file]'),
};
"""


def visit(url, chromium=CHROMIUM, chromedriver=CHROMEDRIVER):
    """What the page at `url` shows when opened and nothing more: its HTTP status (from the
    navigation's timing entry), title, heading, alert text, and whether it offers a file input."""
    driver = None
    try:
        driver = make_driver(chromium, chromedriver)
        driver.get(url)
        return driver.execute_script(VISIT_JS)
    finally:
        quit_driver(driver)


def quit_driver(driver):
    if driver is None:
        return
    try:
        for entry in driver.get_log("browser"):
            log(f"console {entry.get('level')}: {entry.get('message')}")
    except Exception as e:
        log(f"no console log: {e}")
    try:
        driver.quit()
    except Exception:
        pass


def main():
    args = parse_args()
    report = run(args.url, args.file, args.mode, throttle_kbps=args.throttle_kbps,
                 screenshot_path=args.screenshot, timeout=args.timeout, drop_via=args.drop_via,
                 chromium=args.chromium, chromedriver=args.chromedriver)
    print(json.dumps(report))
    return 0 if report["state"] == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
