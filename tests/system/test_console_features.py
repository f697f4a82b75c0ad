"""The console's first-hour features in a real browser (issue 19), against a real server with real jobs:
it opens on the default project; the job list's columns; every list's state, filters and page (and the
costs report's options) kept in the URL (reload and back/forward); actions offered only when allowed; a
not-found page; a cancelled job shown neutrally; empty lists that say how to create the first resource; a
tuning job's trials counted, grouped under it (hidden from the job list unless asked for) and rolled up in
the costs; its plots with hover and zoom (uPlot); and xterm.js drawing `top` in a replica.

The browser, the page wrapper and the screenshots are test_console_browser.py's fixtures.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.jobs import job, python_pool, three_trial_study
from tests.support.server import ServerProcess, wait_for, wait_job
from tests.system import test_console_browser as base
from tests.system.test_console_browser import (
    Console,
    create_job,
    job_id,
    running_with_web_access,
    wait_running,
)

# The browser fixtures, found by pytest by these names.
artifacts = base.artifacts
browser = base.browser
console = base.console

SLEEPER = "import time; time.sleep(300)"


def hash_query(page: Any) -> str:
    """The query of the page's hash route (#/jobs?a=b -> a=b)."""
    return str(page.evaluate("location.hash.split('?')[1] || ''"))


def cancel(server: ServerProcess, name: str) -> None:
    with httpx.Client(base_url=server.url) as client:
        client.post(f"/v1/{name}:cancel")
        wait_job(client, name)


# ------------------------------------------------------------------------------ the default project
def test_first_visit_opens_on_the_default_project(
    browser: Any, server: ServerProcess, artifacts: Path
) -> None:
    with server.client() as client:
        response = client.post(
            "/v1/projects/default/locations/us-central1/customJobs",
            json=job(python_pool("pass"), name="in-the-default-project"),
        )
        assert response.status_code == 200, response.text
    context = browser.new_context()  # a new browser profile: nothing chosen before
    try:
        wrapped = Console(context.new_page(), server.url, artifacts)
        page = wrapped.page
        page.goto(f"{server.url}/console/")
        wrapped.ready("jobs-page")
        assert page.locator("#scope-project").input_value() == "default"
        assert page.locator("#scope-location").input_value() == "us-central1"
        page.locator("#jobs-table tr", has_text="in-the-default-project").wait_for()
        wrapped.shot("default-project")
        assert wrapped.errors == []
    finally:
        context.close()


# ------------------------------------------------------------------------------ the job list
@pytest.fixture(scope="module")
def labelled_jobs(server: ServerProcess) -> list[dict[str, Any]]:
    """Three ended jobs: two labelled team=vision on n1-standard-8 (one fails), one of another team."""
    pool = {**python_pool("pass"), "machineSpec": {"machineType": "n1-standard-8"}}
    failing = {**python_pool("raise SystemExit(3)"), "machineSpec": {"machineType": "n1-standard-8"}}
    bodies = [
        {**job(pool, name="url-vision-ok"), "labels": {"team": "vision"}},
        {**job(failing, name="url-vision-bad"), "labels": {"team": "vision"}},
        {**job(python_pool("pass"), name="url-speech-ok"), "labels": {"team": "speech"}},
    ]
    created = [create_job(server, body) for body in bodies]
    with server.client() as client:
        return [wait_job(client, c["name"]) for c in created]


def test_job_list_columns(console: Console, labelled_jobs: list[dict[str, Any]]) -> None:
    page = console.open("/jobs")
    console.ready("jobs-page")
    headers = page.locator("#jobs-table thead th").all_inner_texts()
    for column in ("Name", "State", "Created", "Machine type", "Labels", "Duration", "Cost"):
        assert column in headers, headers
    row = page.locator("#jobs-table tbody tr", has_text="url-vision-ok")
    assert "n1-standard-8" in row.locator("td.machine").inner_text()
    assert "team=vision" in row.inner_text()
    assert row.locator("time").get_attribute("datetime") == labelled_jobs[0]["createTime"]
    console.shot("jobs-columns")


def test_job_list_state_filters_and_page_are_in_the_url(
    console: Console, labelled_jobs: list[dict[str, Any]]
) -> None:
    page = console.open("/jobs")
    console.ready("jobs-page")
    page.locator("#filter-expr").fill('labels.team="vision"')
    page.get_by_role("button", name="Apply").click()
    page.locator("#jobs-table tr", has_text="url-vision-bad").wait_for()
    assert "filter=labels.team" in hash_query(page)
    page.locator("#filter-state").select_option("JOB_STATE_SUCCEEDED")
    page.locator("#jobs-table tbody tr", has_text="url-vision-bad").wait_for(state="detached")
    # The table is rebuilt from the new answer: read it once its rows are there, not while it is empty.
    page.locator("#jobs-table tbody tr", has_text="url-vision-ok").wait_for()
    assert "state=JOB_STATE_SUCCEEDED" in hash_query(page)
    names = page.locator("#jobs-table tbody td:first-child").all_inner_texts()
    assert names == ["url-vision-ok"]

    # A reload shows the same view: the controls and the rows.
    page.reload()
    console.ready("jobs-page")
    assert page.locator("#filter-state").input_value() == "JOB_STATE_SUCCEEDED"
    assert page.locator("#filter-expr").input_value() == 'labels.team="vision"'
    wait_for(
        lambda: page.locator("#jobs-table tbody td:first-child").all_inner_texts() == ["url-vision-ok"],
        what="the filtered rows after the reload",
    )

    # Back: the filter without the state; forward: with it again.
    page.go_back()
    page.locator("#jobs-table tbody tr", has_text="url-vision-bad").wait_for()
    assert page.locator("#filter-state").input_value() == ""
    assert "state=" not in hash_query(page)
    page.go_forward()
    page.locator("#jobs-table tbody tr", has_text="url-vision-bad").wait_for(state="detached")
    assert page.locator("#filter-state").input_value() == "JOB_STATE_SUCCEEDED"

    # The page: one job a page, the second page survives a reload, back returns to the first.
    console.open('/jobs?pageSize=1&filter=labels.team%3D"vision"')
    console.ready("jobs-page")
    first = page.locator("#jobs-table tbody tr[data-key]").get_attribute("data-key")
    page.get_by_role("button", name="Next page").click()
    page.locator("#jobs-page[data-page='2']").wait_for()
    assert "pageToken=" in hash_query(page)
    second = page.locator("#jobs-table tbody tr[data-key]").get_attribute("data-key")
    assert second != first
    page.reload()
    page.locator("#jobs-page[data-page='2'][data-ready='true']").wait_for()
    assert page.locator("#jobs-table tbody tr[data-key]").get_attribute("data-key") == second
    page.get_by_role("button", name="Previous page").click()
    page.locator("#jobs-page[data-page='1']").wait_for()
    wait_for(
        lambda: page.locator("#jobs-table tbody tr[data-key]").get_attribute("data-key") == first,
        what="the first page again",
    )
    page.go_back()
    page.locator("#jobs-page[data-page='2']").wait_for()
    console.shot("jobs-url-state")


# ------------------------------------------------------------------------------ the other lists
def first_cells(page: Any, table: str) -> list[str]:
    return sorted(page.locator(f"#{table} tbody tr[data-key] td:first-child").all_inner_texts())


@pytest.fixture(scope="module")
def labelled_models(server: ServerProcess) -> list[str]:
    """Three models: two labelled team=vision, one team=speech; their display names."""
    folder = server.home / "buckets" / "console-models" / "weights"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.pt").write_bytes(b"weights")
    names = {"url-model-vision-a": "vision", "url-model-vision-b": "vision", "url-model-speech": "speech"}
    with server.client() as client:
        for name, team in names.items():
            uri = "gs://console-models/weights/"
            model = {"displayName": name, "artifactUri": uri, "labels": {"team": team}}
            response = client.post(f"/v1/{server.parent}/models:upload", json={"model": model})
            assert response.status_code == 200 and response.json()["done"], response.text
    return list(names)


def test_model_list_filters_and_page_are_in_the_url(console: Console, labelled_models: list[str]) -> None:
    """The kinds' lists share the custom jobs list's URL view: filters, reload, back/forward and pages."""
    page = console.open("/models")
    console.ready("models-page")
    assert page.locator("#filter-state").count() == 0  # models have no state
    page.locator("#filter-expr").fill('labels.team="vision"')
    page.get_by_role("button", name="Apply").click()
    vision = ["url-model-vision-a", "url-model-vision-b"]
    wait_for(lambda: first_cells(page, "models-page-table") == vision, what="the vision models")
    assert "filter=labels.team" in hash_query(page)
    page.locator("#filter-name").fill("vision-b")
    page.get_by_role("button", name="Apply").click()
    wait_for(lambda: first_cells(page, "models-page-table") == vision[1:], what="the model named vision-b")
    assert "name=vision-b" in hash_query(page)

    # A reload shows the same view: the controls and the rows.
    page.reload()
    console.ready("models-page")
    assert page.locator("#filter-name").input_value() == "vision-b"
    assert page.locator("#filter-expr").input_value() == 'labels.team="vision"'
    assert first_cells(page, "models-page-table") == vision[1:]

    # Back: the label filter alone; forward: with the name again.
    page.go_back()
    wait_for(lambda: first_cells(page, "models-page-table") == vision, what="the vision models again")
    assert page.locator("#filter-name").input_value() == ""
    assert "name=" not in hash_query(page)
    page.go_forward()
    wait_for(lambda: first_cells(page, "models-page-table") == vision[1:], what="vision-b again")
    assert page.locator("#filter-name").input_value() == "vision-b"

    # The page: one model a page, the second page survives a reload, back returns to it.
    console.open('/models?pageSize=1&filter=labels.team%3D"vision"')
    console.ready("models-page")
    assert page.locator("#filter-size").input_value() == "1"
    rows = page.locator("#models-page-table tbody tr[data-key]")
    first = rows.get_attribute("data-key")
    page.get_by_role("button", name="Next page").click()
    page.locator("#models-page[data-page='2'][data-ready='true']").wait_for()
    assert "pageToken=" in hash_query(page)
    assert "Page 2: 1 model" in page.locator("#models-page [role=status]").inner_text()
    second = rows.get_attribute("data-key")
    assert second != first
    page.reload()
    page.locator("#models-page[data-page='2'][data-ready='true']").wait_for()
    assert rows.get_attribute("data-key") == second
    page.get_by_role("button", name="Previous page").click()
    page.locator("#models-page[data-page='1'][data-ready='true']").wait_for()
    assert rows.get_attribute("data-key") == first
    page.go_back()
    page.locator("#models-page[data-page='2'][data-ready='true']").wait_for()
    assert rows.get_attribute("data-key") == second
    console.shot("models-url-state")


def test_tuning_list_state_is_in_the_url(console: Console, tuning_job: dict[str, Any]) -> None:
    page = console.open("/tuning")
    console.ready("tuning-page")
    row = page.locator("#tuning-table tbody tr", has_text="grouped-tune")
    row.wait_for()
    page.locator("#filter-state").select_option("JOB_STATE_FAILED")
    row.wait_for(state="detached")
    assert "state=JOB_STATE_FAILED" in hash_query(page)
    assert "No hyperparameter tuning jobs match." in page.locator("#tuning-table").inner_text()
    page.reload()
    console.ready("tuning-page")
    assert page.locator("#filter-state").input_value() == "JOB_STATE_FAILED"
    assert row.count() == 0
    console.shot("tuning-url-state")
    page.go_back()
    row.wait_for()
    assert page.locator("#filter-state").input_value() == ""
    page.go_forward()
    row.wait_for(state="detached")
    assert page.locator("#filter-state").input_value() == "JOB_STATE_FAILED"


@pytest.mark.parametrize(
    ("route", "section", "collection"),
    [
        ("/resources", "resources-page", "persistentResources"),
        ("/clusters", "clusters-page", "modelDevelopmentClusters"),
        ("/pipelines", "pipelines-page", "trainingPipelines"),
    ],
)
def test_list_page_size_and_state_are_in_the_url(
    console: Console, route: str, section: str, collection: str
) -> None:
    requested: list[str] = []
    console.page.on("request", lambda r: requested.append(r.url))
    page = console.open(route)
    console.ready(section)
    page.locator("#filter-size").select_option("25")
    wait_for(lambda: "pageSize=25" in hash_query(page), what="the page size in the URL")
    # Pipelines filter on their own states (the API takes a filter); the others only page.
    has_state = page.locator("#filter-state").count() == 1
    assert has_state == (route == "/pipelines")
    if has_state:
        page.locator("#filter-state").select_option("PIPELINE_STATE_FAILED")
        wait_for(lambda: "state=PIPELINE_STATE_FAILED" in hash_query(page), what="the state in the URL")
    requested.clear()
    page.reload()
    console.ready(section)
    assert page.locator("#filter-size").input_value() == "25"
    lists = [u for u in requested if f"/{collection}?" in u]
    assert lists and all("pageSize=25" in u for u in lists), lists
    if has_state:
        assert page.locator("#filter-state").input_value() == "PIPELINE_STATE_FAILED"
        assert all("PIPELINE_STATE_FAILED" in u for u in lists), lists
        page.go_back()
        wait_for(lambda: page.locator("#filter-state").input_value() == "", what="no state after back")
    page.go_back()
    wait_for(lambda: page.locator("#filter-size").input_value() == "50", what="the default size after back")
    assert not page.locator("#banner").is_visible()
    console.shot(f"url-state-{section}")


CREATED_SINCE = 'create_time>"2000-01-01T00:00:00Z"'  # a filter both reports take


def test_costs_options_are_in_the_url(console: Console, labelled_jobs: list[dict[str, Any]]) -> None:
    page = console.open("/costs")
    console.ready("costs-page")
    page.locator("#costs-by").select_option("resource")
    wait_for(lambda: "by=resource" in hash_query(page), what="by=resource in the URL")
    page.locator("#costs-filter").fill(CREATED_SINCE)
    page.get_by_role("button", name="Apply").click()
    wait_for(lambda: "filter=create_time" in hash_query(page), what="the filter in the URL")
    page.reload()
    console.ready("costs-page")
    assert page.locator("#costs-by").input_value() == "resource"
    assert page.locator("#costs-filter").input_value() == CREATED_SINCE
    assert page.locator("#costs-table caption").inner_text() == "Costs by resource"
    page.go_back()
    wait_for(lambda: page.locator("#costs-filter").input_value() == "", what="no filter after back")
    page.go_back()
    wait_for(lambda: page.locator("#costs-by").input_value() == "job", what="by job after back")
    page.locator("#costs-table tr", has_text="url-vision-ok").wait_for()


# ------------------------------------------------------------------------------ a job's page
def test_actions_follow_the_state_and_cancelled_is_neutral(console: Console, server: ServerProcess) -> None:
    created = create_job(server, job(python_pool(SLEEPER), name="actions-running"))
    wait_running(server, created["name"])
    page = console.open(f"/jobs/{job_id(created['name'])}")
    page.locator("#job-page[data-state='JOB_STATE_RUNNING']").wait_for()
    actions = page.locator("#job-actions")
    assert actions.get_by_role("button", name="Cancel job").count() == 1
    assert actions.get_by_role("button", name="Delete job").count() == 0  # the API refuses it while it runs
    console.shot("actions-running")
    cancel(server, created["name"])
    page.locator("#job-page[data-state='JOB_STATE_CANCELLED']").wait_for()
    actions.get_by_role("button", name="Delete job").wait_for()
    assert actions.get_by_role("button", name="Cancel job").count() == 0
    # Cancelled on request: a neutral note, not the red error box.
    note = page.locator("#cancelled-note")
    assert "Cancelled" in note.inner_text()
    assert page.locator("#job-page section.error").count() == 0
    assert (
        page.locator("#job-title [data-state='JOB_STATE_CANCELLED']").get_attribute("class") == "badge muted"
    )
    console.shot("cancelled-neutral")


def test_a_failed_job_still_shows_its_error(console: Console, labelled_jobs: list[dict[str, Any]]) -> None:
    failed = next(j for j in labelled_jobs if j["displayName"] == "url-vision-bad")
    assert failed["state"] == "JOB_STATE_FAILED"
    page = console.open(f"/jobs/{job_id(failed['name'])}")
    console.ready("job-page")
    page.locator("#job-page section.error").wait_for()
    assert page.locator("#cancelled-note").count() == 0


@pytest.mark.parametrize(
    ("route", "title"),
    [
        ("/jobs/987654321", "Custom job not found"),
        ("/tuning/987654321", "Tuning job not found"),
        ("/pipelines/987654321", "Training pipeline not found"),
        ("/resources/no-such-resource", "Persistent resource not found"),
    ],
)
def test_an_unknown_id_shows_a_not_found_page(console: Console, route: str, title: str) -> None:
    page = console.open(route)
    console.ready("not-found-page")
    assert page.locator("h1").inner_text() == title
    assert not page.locator("#banner").is_visible()  # not "Refresh failed"
    console.shot(f"not-found-{route.split('/')[1]}")
    console.errors.clear()  # the browser logs the 404 response itself


# ------------------------------------------------------------------------------ empty states
@pytest.mark.parametrize(
    ("route", "section", "command"),
    [
        ("/jobs", "jobs-page", "trainworks custom-jobs create"),
        ("/tuning", "tuning-page", "trainworks hp-tuning-jobs create"),
        ("/resources", "resources-page", "trainworks persistent-resources create"),
        ("/clusters", "clusters-page", "trainworks clusters create"),
        ("/pipelines", "pipelines-page", "trainworks training-pipelines create"),
        ("/models", "models-page", "trainworks models upload"),
    ],
)
def test_empty_lists_say_how_to_create_the_first(
    console: Console, route: str, section: str, command: str
) -> None:
    page = console.page
    page.goto(f"{console.base}/console/#{route}?project=console-empty&location=europe-west4")
    console.ready(section)
    hint = page.locator(".empty-state pre.cli")
    assert command in hint.inner_text()
    assert "--project console-empty --region europe-west4" in hint.inner_text()
    console.shot(f"empty-{section}")


# ------------------------------------------------------------------------------ tuning jobs
@pytest.fixture(scope="module")
def tuning_job(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A finished three-trial tuning job maximising -(x - 1)^2."""
    body = three_trial_study(tmp_path_factory.mktemp("tuning"), "grouped-tune")
    with server.client() as client:
        response = client.post(f"/v1/{server.parent}/hyperparameterTuningJobs", json=body)
        assert response.status_code == 200, response.text
        done = wait_job(client, response.json()["name"], timeout=180)
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    assert len(done["trials"]) == 3
    return done


def test_tuning_list_counts_the_trials(console: Console, tuning_job: dict[str, Any]) -> None:
    page = console.open("/tuning")
    console.ready("tuning-page")
    page.locator("#tuning-table[data-trials='true']").wait_for()
    row = page.locator("#tuning-table tbody tr", has_text="grouped-tune")
    assert row.locator("td.trials").inner_text() == "3 / 3"
    console.shot("tuning-list-trials")


def test_trials_are_hidden_from_the_job_list_unless_asked(
    console: Console, tuning_job: dict[str, Any]
) -> None:
    page = console.open("/jobs")
    console.ready("jobs-page")
    assert page.locator("#jobs-table tbody tr", has_text="grouped-tune-trial").count() == 0
    page.get_by_label("Show tuning trials").check()
    trials = page.locator("#jobs-table tbody tr", has_text="grouped-tune-trial")
    trials.first.wait_for()
    assert trials.count() == 3
    assert "trials=1" in hash_query(page)
    # Each trial names its tuning job, linked.
    tuning_id = job_id(tuning_job["name"])
    link = trials.first.get_by_role("link", name=f"{tuning_id} (trial")
    assert link.get_attribute("href") == f"#/tuning/{tuning_id}"
    console.shot("jobs-with-trials")
    link.click()
    console.ready("tuning-job-page")


def test_costs_roll_trials_up_under_their_tuning_job(console: Console, tuning_job: dict[str, Any]) -> None:
    page = console.open("/costs")
    console.ready("costs-page")
    table = page.locator("#costs-table")
    group = table.locator("tbody tr.group-row", has_text="grouped-tune")
    group.wait_for()
    assert "tuning job" in group.inner_text()
    assert table.locator("tbody tr", has_text="grouped-tune-trial").count() == 0  # folded under the group
    # The group's cost is the sum of its trials'.
    with httpx.Client(base_url=console.base) as client:
        report = client.get(
            f"/trainworks/v1/{tuning_job['name'].rsplit('/hyperparameterTuningJobs', 1)[0]}/costs",
            params={"by": "job", "filter": f'labels.trainworks-tuning-job="{job_id(tuning_job["name"])}"'},
        ).json()
    assert len(report["rows"]) == 3
    expected = sum(float(r["costUsd"]) for r in report["rows"])
    shown = float(group.locator("td.num").nth(1).inner_text().removeprefix("$"))
    assert abs(shown - expected) <= 0.0001 + expected * 1e-9, (shown, expected)  # the display rounds
    group.get_by_role("button", name="Show 3 trials").click()
    table.locator("tbody tr.trial-row", has_text="grouped-tune-trial").nth(2).wait_for()
    console.shot("costs-tuning-rollup")


def test_tuning_plots_hover_and_zoom(console: Console, tuning_job: dict[str, Any]) -> None:
    page = console.open(f"/tuning/{job_id(tuning_job['name'])}")
    console.ready("tuning-job-page")
    chart = page.locator("#tuning-plots figure.chart[data-ready='true']").first
    chart.wait_for()
    over = chart.locator(".u-over")

    def hovered() -> bool:
        # Hovered through the locator, again until the chart has a point under the cursor: Playwright
        # waits for the plot to be stable and aims where it is now (the page's layout can still move it
        # after it first drew, and a pointer placed by stale coordinates would stay off the plot).
        box = over.bounding_box()
        assert box is not None
        over.hover(position={"x": 2, "y": box["height"] / 2})
        return chart.evaluate("(f) => f.__chart.cursor.idx") is not None

    # Hover: the legend shows the values of the trial under the cursor.
    wait_for(hovered, what="the hovered point")
    box = over.bounding_box()
    assert box is not None
    legend = chart.locator(".u-legend .u-series").nth(1).locator(".u-value").inner_text()
    assert legend not in ("", "—", "--")
    console.shot("tuning-plot-hover")
    # Zoom: a drag across the middle narrows the x scale; a double-click restores it.
    full = chart.evaluate("(f) => [f.__chart.scales.x.min, f.__chart.scales.x.max]")
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.5)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.7, box["y"] + box["height"] * 0.5, steps=5)
    page.mouse.up()
    zoomed = chart.evaluate("(f) => [f.__chart.scales.x.min, f.__chart.scales.x.max]")
    assert zoomed[1] - zoomed[0] < full[1] - full[0]
    console.shot("tuning-plot-zoomed")
    over.dblclick()
    wait_for(
        lambda: chart.evaluate("(f) => [f.__chart.scales.x.min, f.__chart.scales.x.max]") == full,
        what="the full range again",
    )


# ------------------------------------------------------------------------------ the terminal
def screen_text(page: Any) -> list[str]:
    """The lines xterm.js shows (of its active buffer, scrolled where it is), right-trimmed."""
    return page.locator("#terminal-output").evaluate(
        """(el) => { const b = el.__terminal.buffer.active; const out = [];
                     for (let i = 0; i < el.__terminal.rows; i++) {
                       out.push(b.getLine(b.viewportY + i)?.translateToString(true) ?? ""); }
                     return out; }"""
    )


def test_terminal_draws_top(console: Console, server: ServerProcess) -> None:
    name, uris = running_with_web_access(server, SLEEPER, "console-top")
    page = console.page
    page.goto(uris["workerpool0-0"])
    page.locator("#terminal-page[data-connected='true']").wait_for()
    assert page.locator("#terminal-output .xterm").count() == 1
    # Typed into the terminal itself (xterm.js's input), not the line form.
    page.locator("#terminal-output").click()
    page.keyboard.type("top -d 1")
    page.keyboard.press("Enter")
    wait_for(
        lambda: (
            any(line.startswith("top - ") for line in screen_text(page))
            and any(line.lstrip().startswith("PID") for line in screen_text(page))
        ),
        timeout=30,
        what="top's header and process table",
    )
    # Drawn by cursor addressing: the screen was cleared and the header is on the first row (with the escapes
    # dropped instead, it would follow the prompt and the typed command).
    assert screen_text(page)[0].startswith("top - ")
    console.shot("terminal-top")
    page.keyboard.press("q")  # top ends; the shell reads the terminal again
    # top restores the terminal with TCSAFLUSH on its way out: what is typed before that is dropped, so the
    # line is typed again until the shell has run it.
    for _ in range(10):
        page.keyboard.type("echo after-top-$((6 * 7))")
        page.keyboard.press("Enter")
        with contextlib.suppress(AssertionError):
            wait_for(lambda: "after-top-42" in screen_text(page), timeout=3, what="the shell after top")
            break
    assert "after-top-42" in screen_text(page), screen_text(page)
    cancel(server, name)
    page.locator("#terminal-page[data-connected='false']").wait_for(timeout=60_000)
