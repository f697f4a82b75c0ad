// Custom jobs: a filtered, paged list (the API's filter, pageSize and pageToken; never all jobs at once)
// with state, created time, machine type, labels, duration and cost (the costs extension over the page's
// create-time window), refreshed live by polling. The state, filters and page are in the URL
// (#/jobs?state=...&name=...&filter=...&pageSize=...&trials=1&pageToken=...): a reload or back/forward
// shows the same view; the tokens of the pages before the current one ride in the history entry's state.
// A tuning job's trials are CustomJobs labelled with it: hidden here unless asked for.

import { cliScope, get, idOf, parent, query } from "../api.js";
import { filterForm, filterText, isFiltered, listDefaults, pageNumber, pageStatus, pagerButtons, viewOf } from "../listview.js";
import { badge, clear, emptyState, h, runTime, table, usd, when } from "../ui.js";

export const JOB_STATES = [
  "JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED",
  "JOB_STATE_FAILED", "JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED",
];
// The label a tuning job puts on each trial's CustomJob (tuning/trial_jobs.py): its value is the tuning
// job's ID.
export const TUNING_JOB_LABEL = "trainworks-tuning-job";
const TRIAL_LABEL = "trainworks-trial";
const CHECKS = { trials: "Show tuning trials" };
const DEFAULTS = listDefaults({ filterable: true, states: JOB_STATES, checks: CHECKS });

/** The first pool's machine (with its accelerators), and how many more pools there are. */
export function machineOf(job) {
  const pools = (job.jobSpec?.workerPoolSpecs || []).filter((p) => p && p.machineSpec);
  if (!pools.length) return "—";
  const spec = pools[0].machineSpec;
  const gpus = spec.acceleratorType && spec.acceleratorCount ? ` + ${spec.acceleratorCount} × ${spec.acceleratorType}` : "";
  return `${spec.machineType || "?"}${gpus}${pools.length > 1 ? ` (+${pools.length - 1} pool${pools.length > 2 ? "s" : ""})` : ""}`;
}

/** The job's labels as key=value chips (the trial labels are shown as the Tuning job column instead). */
function labelsOf(job) {
  const entries = Object.entries(job.labels || {}).filter(([k]) => k !== TUNING_JOB_LABEL && k !== TRIAL_LABEL);
  if (!entries.length) return "—";
  return h("span.labels", {}, entries.sort().map(([k, v]) => h("span.label.mono", {}, `${k}=${v}`)));
}

/** The tuning job a trial's CustomJob belongs to, linked; a dash for a job of its own. */
function tuningOf(job) {
  const id = job.labels?.[TUNING_JOB_LABEL];
  if (!id) return "—";
  const trial = job.labels?.[TRIAL_LABEL];
  return h("a", { href: `#/tuning/${encodeURIComponent(id)}` }, `${id}${trial ? ` (trial ${trial})` : ""}`);
}

function costFilter(base, jobs) {
  // The list is newest first: the page spans create times [last, first]. The costs extension reports
  // only jobs in that window (and the same filter), not the whole table.
  const first = jobs[0].createTime;
  const last = jobs[jobs.length - 1].createTime;
  const window = `create_time>="${last}" AND create_time<="${first}"`;
  return base ? `(${base}) AND ${window}` : window;
}

function jobLink(job) {
  const id = idOf(job.name);
  return h("a", { href: `#/jobs/${id}` }, job.displayName || id);
}

export async function render(main, _params, ctx) {
  const view = viewOf(ctx.query, DEFAULTS);
  const section = h("section", { id: "jobs-page", "aria-labelledby": "jobs-title" });
  const status = h("p.muted", { role: "status", "aria-live": "polite" });
  const tableHolder = h("div.table-holder");
  const pager = h("nav.pager", { "aria-label": "Pages" });
  const form = filterForm("jobs", view, DEFAULTS, {
    label: "Filter custom jobs", states: JOB_STATES, checks: CHECKS,
  });
  clear(main, section);
  section.append(h("h1", { id: "jobs-title" }, "Custom jobs"), form, status, tableHolder, pager);

  let costs = new Map();
  let generation = 0;

  function renderTable(jobs, nextPageToken) {
    const now = Date.now();
    const focusedKey = document.activeElement?.closest?.("tr[data-key]")?.dataset.key;
    const columns = [
      { label: "Name", cell: jobLink },
      { label: "ID", cell: (j) => idOf(j.name), className: "mono" },
      { label: "State", cell: (j) => badge(j.state) },
      { label: "Created", cell: (j) => when(j.createTime) },
      { label: "Duration", cell: (j) => runTime(j.startTime, j.endTime, now) },
      { label: "Machine type", cell: machineOf, className: "machine" },
      { label: "Labels", cell: labelsOf },
      view.trials ? { label: "Tuning job", cell: tuningOf } : null,
      { label: "Cost", cell: (j) => (costs.has(j.name) ? usd(costs.get(j.name)) : "…"), className: "num cost" },
    ].filter(Boolean);
    const empty = isFiltered(view) || view.pageToken
      ? "No custom jobs match."
      : emptyState("custom jobs", `trainworks custom-jobs create ${cliScope()} --display-name hello \\
    --worker-pool-spec=machine-type=n1-standard-4,container-image-uri=python:3.11 \\
    --command=python3 --args='-c,print(42)'`);
    const t = table("Custom jobs, newest first", columns, jobs, {
      rowKey: (j) => j.name,
      onOpen: (j) => (location.hash = `#/jobs/${idOf(j.name)}`),
      empty,
    });
    t.id = "jobs-table";
    clear(tableHolder, t);
    if (focusedKey) t.querySelector(`tr[data-key="${CSS.escape(focusedKey)}"]`)?.focus();
    status.textContent = pageStatus(view, jobs.length, "job");
    section.dataset.page = String(pageNumber(view));
    clear(pager, ...pagerButtons("jobs", view, DEFAULTS, nextPageToken));
  }

  async function loadCosts(base, jobs, mine) {
    if (!jobs.length) return;
    const report = await get(`/trainworks/v1/${parent()}/costs${query({ by: "job", filter: costFilter(base, jobs) })}`);
    if (mine !== generation || !ctx.active) return;
    costs = new Map((report.rows || []).map((row) => [row.name, row.costUsd]));
    for (const tr of tableHolder.querySelectorAll("tr[data-key]")) {
      const cell = tr.querySelector("td.cost");
      if (cell) cell.textContent = costs.has(tr.dataset.key) ? usd(costs.get(tr.dataset.key)) : "—";
    }
    if (!section.dataset.costs) performance.mark("jobs-costs-rendered");
    section.dataset.costs = "true";
  }

  async function load() {
    const mine = ++generation;
    const base = filterText(view, view.trials ? [] : [`NOT labels:${TUNING_JOB_LABEL}`]);
    const page = await get(`/v1/${parent()}/customJobs${query({ pageSize: view.pageSize, pageToken: view.pageToken, filter: base })}`);
    if (mine !== generation || !ctx.active) return;
    const list = page.customJobs || [];
    renderTable(list, page.nextPageToken || "");
    if (!section.dataset.ready) performance.mark("jobs-list-rendered");  // read by benchmarks/console_list.py
    section.dataset.ready = "true";
    section.dataset.updated = String(Date.now());
    // The cost column fills in after the rows: the list never waits on the costs report.
    loadCosts(base, list, mine).catch(() => {});
  }

  await ctx.live(load, 2000);
}
