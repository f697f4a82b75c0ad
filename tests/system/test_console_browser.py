"""The web console in a real browser: Debian's headless Chromium driven by Playwright against a real server
with real jobs. Every page loads without browser console errors; list -> detail -> logs shows a replica's
output; a running job is cancelled from the UI and its state changes without a reload; the web terminal runs
a command in a replica. Screenshots go to $TRAINWORKS_TEST_ARTIFACTS/console (else .test-artifacts/console in
the checkout, git-ignored), printed; a failed test leaves a FAILED-<test>.png of the page it ended on.
test_console_features.py uses this module's browser fixtures for the console's other pages and controls.

The serving tests at the top need no browser.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.jobs import END_TOGETHER, job, python_pool, three_trial_study
from tests.support.paths import REPO
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_for, wait_job

CHROMIUM = "/usr/bin/chromium"
# The flags known to work here: without the background-networking ones Chromium keeps dialling out.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCOPE = f"project={PROJECT}&location={LOCATION}"
TIMEOUT_MS = 20_000
# How a script or stylesheet would load something by URL.
REMOTE_LOADS = ('from "http', "from'http", 'import("http', "url(http", "url('http", 'url("http', "//cdn")


# ------------------------------------------------------------------------------ serving (no browser)
def test_console_is_served_by_the_server(server: ServerProcess) -> None:
    with server.client(follow_redirects=False) as client:
        redirect = client.get("/console")
        assert redirect.status_code == 307 and redirect.headers["location"] == "/console/"
        index = client.get("/console/")
        assert index.status_code == 200 and "text/html" in index.headers["content-type"]
        assert '<script type="module" src="/console/assets/app.js">' in index.text
        # webAccessUris point at server paths: the same page routes them client-side.
        deep = client.get("/console/terminal/123/us-central1/7/workerpool0-0")
        assert deep.status_code == 200 and deep.text == index.text
        script = client.get("/console/assets/app.js")
        assert script.status_code == 200 and "javascript" in script.headers["content-type"]
        # The vendored libraries (vendor/README.md) come from the server too, as modules with their CSS.
        for path in (
            "/console/vendor/xterm-6.0.0/xterm.mjs",
            "/console/vendor/xterm-addon-fit-0.11.0/addon-fit.mjs",
            "/console/vendor/uplot-1.6.32/uPlot.esm.js",
        ):
            module = client.get(path)
            assert module.status_code == 200 and "javascript" in module.headers["content-type"], path
        assert client.get("/console/vendor/xterm-6.0.0/xterm.css").status_code == 200
        assert client.get("/console/vendor/xterm-6.0.0/LICENSE").status_code == 200
        # The project and location a first visit opens on: the CLI's default project.
        defaults = client.get("/console/defaults.json")
        assert defaults.status_code == 200
        assert defaults.json() == {"project": "default", "location": "us-central1"}
        missing = client.get("/console/assets/nope.js")
        assert missing.status_code == 404
        assert missing.json()["error"]["status"] == "NOT_FOUND"


def test_console_assets_fetch_nothing_from_outside() -> None:
    static = REPO / "src" / "trainworks" / "console" / "static"
    vendor = static / "vendor"
    for path in static.rglob("*"):
        if path.suffix in (".js", ".mjs", ".css", ".html") and vendor not in path.parents:
            # The SVG namespace is a name, not a fetch; the TensorBoard link points at the user's loopback.
            text = path.read_text().replace('"http://www.w3.org/2000/svg"', "")
            text = text.replace('"http://127.0.0.1:6006/"', "")
            assert "http://" not in text and "https://" not in text and "//cdn" not in text, path


def test_vendored_libraries_are_pinned_with_their_licences_and_fetch_nothing() -> None:
    """The vendored files are the packages' own, unchanged: their comments cite web pages, so what is checked
    is that nothing in them loads from outside (no import, stylesheet or script by URL), and that each folder
    carries its LICENSE and a row of vendor/README.md."""
    vendor = REPO / "src" / "trainworks" / "console" / "static" / "vendor"
    readme = (vendor / "README.md").read_text()
    folders = sorted(p for p in vendor.iterdir() if p.is_dir())
    assert [p.name for p in folders] == ["uplot-1.6.32", "xterm-6.0.0", "xterm-addon-fit-0.11.0"]
    for folder in folders:
        assert (folder / "LICENSE").read_text().strip(), folder
        assert f"`{folder.name}/`" in readme, folder
        for path in folder.iterdir():
            if path.suffix not in (".js", ".mjs", ".css"):
                continue
            text = path.read_text()
            for fetch in REMOTE_LOADS:
                assert fetch not in text, (path, fetch)


def test_console_pages_are_open_but_the_api_needs_the_token(tmp_path: Path) -> None:
    proc = ServerProcess(home=tmp_path / "home", args=["--api-token", "s3cret"]).start()
    try:
        with proc.client() as client:
            assert client.get("/console/").status_code == 200
            assert client.get("/console/assets/api.js").status_code == 200
            refused = client.get(f"/v1/{proc.parent}/customJobs")
            assert refused.status_code == 403
            ok = client.get(f"/v1/{proc.parent}/customJobs", headers={"Authorization": "Bearer s3cret"})
            assert ok.status_code == 200
    finally:
        proc.stop()


# ------------------------------------------------------------------------------ browser
@pytest.fixture(scope="module")
def artifacts() -> Path:
    configured = os.environ.get("TRAINWORKS_TEST_ARTIFACTS")
    folder = Path(configured) / "console" if configured else REPO / ".test-artifacts" / "console"
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nconsole screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing: scripts/install-test-deps.sh installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


class Console:
    """A browser page on the console that records console errors and failed requests."""

    def __init__(self, page: Any, base: str, artifacts: Path) -> None:
        self.page = page
        self.base = base
        self.artifacts = artifacts
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        page.set_default_timeout(TIMEOUT_MS)

    def open(self, route: str) -> Any:
        sep = "&" if "?" in route else "?"
        self.page.goto(f"{self.base}/console/#{route}{sep}{SCOPE}")
        return self.page

    def ready(self, section_id: str) -> Any:
        locator = self.page.locator(f"#{section_id}[data-ready='true']")
        locator.wait_for()
        return locator

    def shot(self, name: str) -> Path:
        path = self.artifacts / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def mark(self) -> None:
        """A marker that a reload would erase: the state changes we check happen without one."""
        self.page.evaluate("window.__noReload = true")

    def not_reloaded(self) -> bool:
        return bool(self.page.evaluate("window.__noReload === true"))


@pytest.fixture
def console(
    browser: Any, server: ServerProcess, artifacts: Path, request: pytest.FixtureRequest
) -> Iterator[Console]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    wrapped = Console(page, server.url, artifacts)
    failures = request.session.testsfailed
    try:
        yield wrapped
    finally:
        # The test's call has been reported by now: a failure leaves the page it ended on as an artifact.
        if request.session.testsfailed > failures:
            try:
                wrapped.shot(f"FAILED-{request.node.name}")
            except Exception as exc:  # noqa: BLE001 - a closed page must not hide the test's own failure
                print(f"no screenshot of the failure: {exc}")
        context.close()
    assert wrapped.errors == [], f"browser console errors: {wrapped.errors}"


def create_job(server: ServerProcess, body: dict[str, Any]) -> dict[str, Any]:
    with server.client() as client:
        response = client.post(f"/v1/{server.parent}/customJobs", json=body)
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]


def job_id(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def wait_running(server: ServerProcess, name: str) -> None:
    with server.client() as client:
        wait_job(client, name, {"JOB_STATE_RUNNING"}, timeout=60)

        def replica_running() -> bool:
            status = client.get(f"/trainworks/v1/{name}/status").json()
            return any(r["phase"] == "running" and r.get("pid") for r in status["replicas"])

        wait_for(replica_running, timeout=60, what=f"a running replica of {name}")


def running_with_web_access(server: ServerProcess, code: str, name: str) -> tuple[str, dict[str, str]]:
    """A one-replica job running `code` with web access, once it runs: its name and its webAccessUris."""
    created = create_job(server, job(python_pool(code), name=name, enableWebAccess=True))
    wait_running(server, created["name"])
    with server.client() as client:
        uris = wait_for(
            lambda: client.get(f"/v1/{created['name']}").json().get("webAccessUris"),
            timeout=30,
            what="webAccessUris",
        )
    return created["name"], dict(uris)


@pytest.fixture(scope="module")
def finished_job(server: ServerProcess) -> dict[str, Any]:
    """A two-replica job that printed a line per replica and succeeded. The replicas end together
    (END_TOGETHER): the job ends with its primary, and a worker still starting then would be stopped before
    its line."""
    code = (
        "import json, os\n"
        "task = json.loads(os.environ['CLUSTER_SPEC'])['task']\n"
        "print(f\"console-says-hello {task['type']}-{task['index']}\", flush=True)\n"
    ) + END_TOGETHER
    output = {"outputUriPrefix": "gs://console-bucket/hello"}
    body = job(python_pool(code), python_pool(code), name="console-hello", baseOutputDirectory=output)
    created = create_job(server, body)
    with server.client() as client:
        done = wait_job(client, created["name"])
    assert done["state"] == "JOB_STATE_SUCCEEDED", json.dumps(done)
    return done


def test_every_page_loads_without_errors(console: Console, finished_job: dict[str, Any]) -> None:
    pages = [
        ("/jobs", "jobs-page"),
        (f"/jobs/{job_id(finished_job['name'])}", "job-page"),
        ("/tuning", "tuning-page"),
        ("/resources", "resources-page"),
        ("/clusters", "clusters-page"),
        ("/pipelines", "pipelines-page"),
        ("/models", "models-page"),
        ("/costs", "costs-page"),
    ]
    for route, section in pages:
        console.open(route)
        console.ready(section)
        assert console.page.locator("h1").first.inner_text().strip()
        console.shot(f"page-{section}")
    # Dark mode (prefers-color-scheme) renders too.
    console.page.emulate_media(color_scheme="dark")
    console.open("/jobs")
    console.ready("jobs-page")
    console.shot("page-jobs-dark")
    # The job shows in the costs report.
    console.open("/costs")
    console.ready("costs-page")
    assert "console-hello" in console.page.locator("#costs-table").inner_text()


def test_list_detail_logs(console: Console, finished_job: dict[str, Any]) -> None:
    page = console.open("/jobs")
    console.ready("jobs-page")
    row = page.locator("#jobs-table tr", has_text="console-hello").first
    assert "Succeeded" in row.inner_text()
    row.get_by_role("link", name="console-hello").click()
    console.ready("job-page")
    assert page.locator("#job-page").get_attribute("data-state") == "JOB_STATE_SUCCEEDED"
    replicas = page.locator("#replicas-table")
    replicas.get_by_text("workerpool1-0").wait_for()
    assert "exited" in replicas.inner_text()
    assert page.locator("#timeline").get_by_text("Ended: succeeded").count() == 1
    # The TensorBoard log dir (AIP_TENSORBOARD_LOG_DIR) and how to launch TensorBoard on it.
    tensorboard = page.locator("#tensorboard")
    assert "gs://console-bucket/hello/logs/" in tensorboard.inner_text()
    assert f"trainworks tensorboard {job_id(finished_job['name'])}" in tensorboard.inner_text()
    # All replicas first, then one replica's own output.
    logs = page.locator("#logs")
    logs.get_by_text("console-says-hello workerpool0-0").wait_for()
    page.locator("#log-task").select_option("workerpool1-0")
    logs.get_by_text("console-says-hello workerpool1-0").wait_for()
    page.locator("#log-state", has_text="End of logs.").wait_for()
    assert logs.locator("[data-task='workerpool0-0']").count() == 0  # only that replica (and the service)
    console.shot("job-detail-logs")


def test_keyboard_opens_a_job_from_the_list(console: Console, finished_job: dict[str, Any]) -> None:
    page = console.open("/jobs")
    console.ready("jobs-page")
    row = page.locator("#jobs-table tbody tr", has_text="console-hello").first
    row.focus()
    page.keyboard.press("Enter")
    page.wait_for_url(f"**#/jobs/{job_id(finished_job['name'])}")
    console.ready("job-page")
    # Every form control in the header and the page has a label.
    unlabeled = page.evaluate(
        """() => [...document.querySelectorAll('input, select')]
              .filter((el) => !el.labels?.length && !el.getAttribute('aria-label')).map((el) => el.id)"""
    )
    assert unlabeled == []


def test_cancel_a_running_job_from_the_ui(console: Console, server: ServerProcess) -> None:
    created = create_job(server, job(python_pool("import time; time.sleep(300)"), name="console-cancel-me"))
    wait_running(server, created["name"])
    page = console.open("/jobs")
    console.ready("jobs-page")
    console.mark()
    page.locator("#jobs-table tr", has_text="console-cancel-me").get_by_role("link").click()
    page.locator("#job-page[data-state='JOB_STATE_RUNNING']").wait_for()
    page.get_by_role("button", name="Cancel job").click()
    dialog = page.locator("#confirm-dialog")
    dialog.get_by_text("Cancel custom job").wait_for()
    console.shot("cancel-confirm")
    dialog.get_by_role("button", name="Cancel job").click()
    page.locator("#job-page[data-state='JOB_STATE_CANCELLED']").wait_for(timeout=60_000)
    assert "Cancelled" in page.locator("#job-title").inner_text()
    assert console.not_reloaded()
    with server.client() as client:
        assert client.get(f"/v1/{created['name']}").json()["state"] == "JOB_STATE_CANCELLED"
    console.shot("cancelled")


def test_list_updates_live(console: Console, server: ServerProcess) -> None:
    page = console.open("/jobs")
    console.ready("jobs-page")
    console.mark()
    created = create_job(server, job(python_pool("pass"), name="console-live-new"))
    row = page.locator("#jobs-table tr", has_text="console-live-new")
    row.wait_for()
    row.locator("[data-state='JOB_STATE_SUCCEEDED']").wait_for(timeout=60_000)
    # The cost column fills in from the costs extension.
    wait_for(lambda: row.locator("td.cost").inner_text().startswith("$"), what="the cost cell")
    assert console.not_reloaded()
    assert job_id(created["name"]) in row.inner_text()


def test_filter_by_state(console: Console, finished_job: dict[str, Any]) -> None:
    page = console.open("/jobs")
    console.ready("jobs-page")
    page.locator("#filter-state").select_option("JOB_STATE_FAILED")
    page.locator("#jobs-table", has_text="No custom jobs match.").wait_for()
    page.locator("#filter-state").select_option("JOB_STATE_SUCCEEDED")
    page.locator("#jobs-table tr", has_text="console-hello").wait_for()
    # A bad filter is reported, naming the field, not a blank page.
    page.locator("#filter-state").select_option("")
    page.locator("#filter-expr").fill("create_time > nonsense")
    page.get_by_role("button", name="Apply").click()
    page.locator("#banner", has_text="filter").wait_for()
    console.errors.clear()  # the browser logs the 400 response itself


def test_tuning_job_trials_and_plots(console: Console, server: ServerProcess, tmp_path: Path) -> None:
    body = three_trial_study(tmp_path, "console-tune")
    with server.client() as client:
        response = client.post(f"/v1/{server.parent}/hyperparameterTuningJobs", json=body)
        assert response.status_code == 200, response.text
        name = response.json()["name"]
        wait_job(client, name, timeout=120)
    page = console.open("/tuning")
    console.ready("tuning-page")
    page.locator("#tuning-table tr", has_text="console-tune").get_by_role("link").click()
    console.ready("tuning-job-page")
    trials = page.locator("#trials-table tbody tr")
    assert trials.count() == 3
    plots = page.locator("#tuning-plots figure.chart[data-ready='true']")
    plots.nth(1).wait_for()
    assert plots.count() == 2  # metric per trial, and x against the metric
    # uPlot's data: [x, metric, best so far] and [x, metric]; three measured points each.
    data = plots.evaluate_all("(figs) => figs.map((f) => f.__chart.data)")
    assert len(data[0]) == 3 and sum(y is not None for y in data[0][1]) == 3
    assert all(b is not None for b in data[0][2])  # the best-so-far line
    assert len(data[1]) == 2 and sum(y is not None for y in data[1][1]) == 3
    assert plots.nth(0).locator("canvas").count() == 1
    console.shot("tuning-job")


def test_web_terminal_runs_a_command_in_a_replica(console: Console, server: ServerProcess) -> None:
    name, uris = running_with_web_access(server, "import time; time.sleep(300)", "console-shell")
    assert set(uris) == {"workerpool0-0"}
    page = console.page
    # The job page links the terminal; the link is the URI the API gave.
    console.open(f"/jobs/{job_id(name)}")
    console.ready("job-page")
    link = page.locator("#web-terminals a[data-replica='workerpool0-0']")
    assert link.get_attribute("href") == uris["workerpool0-0"]
    link.click()
    page.locator("#terminal-page[data-connected='true']").wait_for()
    command = page.get_by_role("textbox", name="Command")
    command.fill("echo console-shell-$((6 * 7)) && pwd")
    command.press("Enter")
    output = page.locator("#terminal-output")
    output.get_by_text("console-shell-42").wait_for()
    console.shot("web-terminal")
    with httpx.Client(base_url=server.url) as client:
        client.post(f"/v1/{name}:cancel")
        wait_job(client, name)
    page.locator("#terminal-page[data-connected='false']").wait_for(timeout=60_000)


def test_console_asks_for_the_token_and_keeps_it_for_the_tab(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    proc = ServerProcess(home=tmp_path / "home", args=["--api-token", "s3cret"]).start()
    context = browser.new_context()
    try:
        console = Console(context.new_page(), proc.url, artifacts)
        page = console.open("/jobs")
        dialog = page.locator("#token-dialog")
        dialog.get_by_text("missing a valid API key").wait_for()
        dialog.get_by_label("Token").fill("s3cret")
        dialog.get_by_role("button", name="Save").click()
        console.ready("jobs-page")
        assert page.evaluate("sessionStorage.getItem('trainworks.token')") == "s3cret"
        # A reload keeps the token (same tab): no second prompt.
        page.reload()
        console.ready("jobs-page")
        assert not dialog.is_visible()
        console.shot("token-accepted")
        # The one refused request before the token was entered is the only error the browser logged.
        assert all("403" in e for e in console.errors), console.errors
    finally:
        context.close()
        proc.stop()


def test_paging_never_loads_all_jobs(console: Console, server: ServerProcess) -> None:
    for i in range(3):
        create_job(server, job(python_pool("pass"), name=f"console-page-{i}"))
    requested: list[str] = []
    console.page.on("request", lambda r: requested.append(r.url))
    page = console.open("/jobs?pageSize=2")
    console.ready("jobs-page")
    rows = page.locator("#jobs-table tbody tr[data-key]")
    first = rows.evaluate_all("(trs) => trs.map((tr) => tr.dataset.key)")
    assert len(first) == 2
    page.get_by_role("button", name="Next page").click()
    page.locator("#jobs-page [role=status]", has_text="Page 2").wait_for()
    second = rows.evaluate_all("(trs) => trs.map((tr) => tr.dataset.key)")
    assert len(second) == 2 and not set(first) & set(second)
    page.get_by_role("button", name="Previous page").click()
    page.locator("#jobs-page [role=status]", has_text="Page 1").wait_for()
    lists = [u for u in requested if "/customJobs?" in u]
    assert lists and all("pageSize=2" in u for u in lists), lists


# ------------------------------------------------------------------------------ the log viewer
BIG_LINES = 100_000  # per replica: two replicas, 200,000 lines


@pytest.fixture(scope="module")
def big_job(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two replicas that wrote 100,000 lines each as fast as they could: every 1,000th on stderr. The primary
    ends after the worker has written its last line (a file in a folder both see): the primary's exit ends
    the job, and a worker still writing would be stopped before its end."""
    gate = tmp_path_factory.mktemp("big-log-gate")
    code = (
        "import json, os, sys, time\n"
        "task = json.loads(os.environ['CLUSTER_SPEC'])['task']; me = f\"{task['type']}-{task['index']}\"\n"
        "out, err = sys.stdout.write, sys.stderr.write\n"
        f"for i in range({BIG_LINES}):\n"
        "    if i % 1000 == 0:\n"
        "        err(f'{me} err {i:06d}\\n')\n"
        "    else:\n"
        "        out(f'{me} line {i:06d}\\n')\n"
        "sys.stdout.flush(); sys.stderr.flush()\n"
        f"gate = {str(gate)!r}\n"
        "if task['type'] == 'workerpool0':\n"
        "    deadline = time.monotonic() + 170\n"
        "    while not os.path.exists(os.path.join(gate, 'worker-done')) and time.monotonic() < deadline:\n"
        "        time.sleep(0.01)\n"
        "print(f'{me} finished', flush=True)\n"
        "if task['type'] != 'workerpool0':\n"
        "    open(os.path.join(gate, 'worker-done'), 'w').close()\n"
    )
    created = create_job(server, job(python_pool(code), python_pool(code), name="console-big-log"))
    with server.client() as client:
        done = wait_job(client, created["name"], timeout=180)
    assert done["state"] == "JOB_STATE_SUCCEEDED", json.dumps(done)
    return done


def shown(page: Any) -> list[dict[str, str]]:
    """The rows the log viewer has on screen: task, severity and text."""
    return page.locator("#logs .log-row:not([hidden])").evaluate_all(
        """(rows) => rows.map((r) => ({task: r.dataset.task, severity: r.dataset.severity,
                                       text: r.querySelector('.log-text').textContent}))"""
    )


def test_log_viewer_on_200k_lines(console: Console, big_job: dict[str, Any]) -> None:
    page = console.open(f"/jobs/{job_id(big_job['name'])}")
    console.ready("job-page")
    logs = page.locator("#logs")
    assert logs.get_attribute("role") == "log" and logs.get_attribute("aria-label") == "Job logs"

    # The first lines show (an ended job opens at its start); only the rows on screen are in the page.
    def at_start() -> bool:
        rows = shown(page)
        first_lines = (" line 000001", " err 000000")  # whichever replica started first
        started = any(r["text"].endswith(first_lines) for r in rows)
        return bool(rows) and rows[0]["task"] == "service" and started

    wait_for(at_start, what="the log's first lines")
    assert page.locator("#logs .log-row").count() < 100
    console.shot("log-viewer-start")
    # The end, with the last lines: the replicas' last, then the platform's.
    page.locator("#log-end").click()
    logs.get_by_text("Job completed successfully.", exact=True).wait_for()
    page.locator("#log-state", has_text="End of logs.").wait_for()
    assert shown(page)[-1]["text"] == "Job completed successfully."
    assert any(r["text"].endswith(" finished") for r in shown(page) if r["task"] != "service")
    # The keyboard scrolls it; Home goes back to the start.
    logs.focus()
    top = logs.evaluate("(el) => el.scrollTop")
    page.keyboard.press("PageUp")
    wait_for(lambda: logs.evaluate("(el) => el.scrollTop") < top, what="the log to scroll up")
    page.keyboard.press("Home")
    wait_for(at_start, what="the log's start again")

    # Scrolling down pages in more lines as they are needed.
    def loaded() -> int:
        return int(page.locator("#log-loaded").inner_text().split()[0].replace(",", ""))

    for _ in range(3):
        before = loaded()
        logs.evaluate("(el) => { el.scrollTop = el.scrollHeight; }")
        wait_for(lambda before=before: loaded() > before, what="the next page")
    assert loaded() >= 1500

    # Filters are the endpoint's: severity, text, replica.
    page.locator("#log-severity").select_option("ERROR")
    logs.get_by_text("workerpool0-0 err 000000", exact=True).wait_for()
    wait_for(lambda: {r["severity"] for r in shown(page)} == {"ERROR"}, what="only errors")
    page.locator("#log-severity").select_option("")
    page.get_by_label("Search").fill("LINE 054321")
    page.get_by_label("Search").press("Enter")
    logs.get_by_text("workerpool1-0 line 054321", exact=True).wait_for()
    wait_for(lambda: len(shown(page)) == 2, what="the two matching lines")
    assert {r["text"] for r in shown(page)} == {"workerpool0-0 line 054321", "workerpool1-0 line 054321"}
    page.get_by_label("Search").fill("")
    page.get_by_label("Search").press("Enter")
    page.locator("#log-task").select_option("workerpool1-0")
    wait_for(
        lambda: shown(page) and {r["task"] for r in shown(page)} <= {"workerpool1-0", "service"},
        what="one replica's lines (and the platform's)",
    )
    logs.get_by_text("workerpool1-0 line 000001", exact=True).wait_for()
    console.shot("log-viewer-filtered")

    # The whole log downloads as a file.
    with page.expect_download() as download:
        page.locator("#log-download-text").click()
    saved = download.value
    assert saved.suggested_filename == f"customJob-{job_id(big_job['name'])}.log"
    lines = Path(saved.path()).read_text().splitlines()
    assert sum(line.split(" ")[1].startswith("workerpool") for line in lines) == 2 * BIG_LINES + 2
    assert lines[-1].endswith("service INFO Job completed successfully.")


def test_log_viewer_follows_a_live_job(console: Console, server: ServerProcess, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    code = (
        "import time\nfrom pathlib import Path\ni = 0\n"
        f"while not Path({str(stop)!r}).exists():\n"
        "    print(f'tick {i:07d}', flush=True); i += 1; time.sleep(0.002)\n"
        "print('live job done', flush=True)"
    )
    created = create_job(server, job(python_pool(code), name="console-live-log"))
    try:
        wait_running(server, created["name"])
        page = console.open(f"/jobs/{job_id(created['name'])}")
        console.ready("job-page")
        assert page.locator("#log-follow").is_checked()  # a running job is followed from its end
        page.locator("#log-state", has_text="Following").wait_for()

        def newest() -> int:
            ticks = [r["text"] for r in shown(page) if r["text"].startswith("tick ")]
            return int(ticks[-1].split()[1]) if ticks else -1

        first = wait_for(lambda: newest() >= 0 and newest(), what="live lines")
        # New lines keep coming at the bottom, which the view sticks to.
        wait_for(lambda: newest() > first + 200, what="newer lines at the bottom")
        at_bottom = "(el) => el.scrollTop + el.clientHeight >= el.scrollHeight - 20"
        assert page.locator("#logs").evaluate(at_bottom)
        console.shot("log-viewer-live")
    finally:
        stop.touch()
    page.locator("#logs").get_by_text("live job done", exact=True).wait_for(timeout=60_000)
    page.locator("#log-state", has_text="End of logs.").wait_for(timeout=60_000)
    assert shown(page)[-1]["text"] == "Job completed successfully."
