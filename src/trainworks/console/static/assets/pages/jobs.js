// Custom jobs: a filtered, paged list (the API's filter, pageSize and pageToken; never all jobs at once)
// with state, age, duration and cost (the costs extension over the page's create-time window), refreshed
// live by polling.

import { get, idOf, parent, query } from "../api.js";
import { age, badge, clear, h, runTime, table, usd } from "../ui.js";

const STATES = [
  "JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED",
  "JOB_STATE_FAILED", "JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED",
];

// Kept across visits: coming back from a job shows the same filter and page.
const view = { state: "", name: "", filter: "", pageSize: 50, tokens: [""] };

/** The AIP-160 filter of the form: state, a display-name glob and the user's own expression, ANDed. */
export function filterText({ state, name, filter }) {
  const terms = [];
  if (state) terms.push(`state=${state}`);
  const cleaned = name.replaceAll('"', "").trim();
  if (cleaned) terms.push(`display_name:"*${cleaned}*"`);
  if (filter.trim()) terms.push(`(${filter.trim()})`);
  return terms.join(" AND ");
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
  // #/jobs?pageSize=N (a shared link, or the benchmark) picks the page size.
  const requested = Number(ctx.query.get("pageSize"));
  if (Number.isInteger(requested) && requested > 0 && requested !== view.pageSize) {
    view.pageSize = Math.min(requested, 1000);
    view.tokens = [""];
  }
  const section = h("section", { id: "jobs-page", "aria-labelledby": "jobs-title" });
  const status = h("p.muted", { role: "status", "aria-live": "polite" });
  const tableHolder = h("div.table-holder");
  const pager = h("nav.pager", { "aria-label": "Pages" });

  const stateSelect = h(
    "select",
    { id: "filter-state", name: "state" },
    h("option", { value: "" }, "Any state"),
    STATES.map((s) => h("option", { value: s, selected: view.state === s }, s.replace("JOB_STATE_", "").toLowerCase())),
  );
  const nameInput = h("input", { id: "filter-name", name: "name", type: "search", value: view.name, placeholder: "part of the name" });
  const filterInput = h("input", {
    id: "filter-expr", name: "filter", type: "text", value: view.filter, size: "40",
    placeholder: 'labels.team="vision" AND create_time>"2024-01-01T00:00:00Z"',
  });
  const sizeSelect = h(
    "select",
    { id: "filter-size", name: "pageSize" },
    [...new Set([25, 50, 100, 200, view.pageSize])].sort((a, b) => a - b).map((n) => h("option", { value: String(n), selected: view.pageSize === n }, String(n))),
  );
  const form = h(
    "form.filters",
    { role: "search", "aria-label": "Filter custom jobs" },
    h("label", {}, "State ", stateSelect),
    h("label", {}, "Name contains ", nameInput),
    h("label", {}, "Filter ", filterInput),
    h("label", {}, "Per page ", sizeSelect),
    h("button", { type: "submit" }, "Apply"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    view.state = stateSelect.value;
    view.name = nameInput.value;
    view.filter = filterInput.value;
    view.pageSize = Number(sizeSelect.value);
    view.tokens = [""];
    load();
  });
  stateSelect.addEventListener("change", () => form.requestSubmit());
  sizeSelect.addEventListener("change", () => form.requestSubmit());

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
      { label: "Age", cell: (j) => age(j.createTime, now) },
      { label: "Duration", cell: (j) => runTime(j.startTime, j.endTime, now) },
      { label: "Cost", cell: (j) => (costs.has(j.name) ? usd(costs.get(j.name)) : "…"), className: "num cost" },
    ];
    const t = table("Custom jobs, newest first", columns, jobs, {
      rowKey: (j) => j.name,
      onOpen: (j) => (location.hash = `#/jobs/${idOf(j.name)}`),
      empty: "No custom jobs match.",
    });
    t.id = "jobs-table";
    clear(tableHolder, t);
    if (focusedKey) t.querySelector(`tr[data-key="${CSS.escape(focusedKey)}"]`)?.focus();
    const page = view.tokens.length;
    status.textContent = `Page ${page}: ${jobs.length} job${jobs.length === 1 ? "" : "s"}`;
    const previous = h("button", { type: "button", disabled: page === 1 }, "Previous page");
    previous.addEventListener("click", () => {
      view.tokens.pop();
      load();
    });
    const next = h("button", { type: "button", disabled: !nextPageToken }, "Next page");
    next.addEventListener("click", () => {
      view.tokens.push(nextPageToken);
      load();
    });
    clear(pager, previous, next);
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
    const base = filterText(view);
    const token = view.tokens[view.tokens.length - 1];
    const page = await get(`/v1/${parent()}/customJobs${query({ pageSize: view.pageSize, pageToken: token, filter: base })}`);
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
