// Costs: the costs extension's report by job or by persistent resource, with an optional filter. By job,
// the CustomJobs that ran a tuning job's trials are rolled up under their tuning job (a row with the sums,
// its trials listed under it): the report does not say which job is a trial, their labels do
// (tuning/trial_jobs.py), so the console asks for the trial jobs' names and labels once.

import { get, idOf, parent, query } from "../api.js";
import { hashOf, viewOf } from "../listview.js";
import { badge, clear, facts, go, h, hours, table, usd } from "../ui.js";
import { TUNING_JOB_LABEL } from "./jobs.js";

// The report's options, in the URL (#/costs?by=resource&filter=...) as the lists' filters are.
const DEFAULTS = { by: "job", filter: "" };
const SUMMED = ["machineHours", "costUsd", "onDemandEquivalentUsd", "coveredUsd"];

// CustomJob name -> its tuning job's ID, "" for a job of its own. Labels never change: kept for the tab.
const tuningOf = new Map();
const tuningJobs = new Map(); // tuning job ID -> the tuning job (for its name and state)

/** Learns which of `rows` are trials (and of which tuning job): the trial jobs' names and labels, paged. */
async function classify(rows) {
  const unknown = rows.filter((r) => r.kind !== "persistentResource" && !tuningOf.has(r.name));
  if (!unknown.length) return;
  let pageToken = "";
  do {
    const page = await get(`/v1/${parent()}/customJobs${query({
      filter: `labels:${TUNING_JOB_LABEL}`, readMask: "name,labels", pageSize: 1000, pageToken,
    })}`);
    for (const job of page.customJobs || []) tuningOf.set(job.name, job.labels?.[TUNING_JOB_LABEL] || "");
    pageToken = page.nextPageToken || "";
  } while (pageToken);
  for (const row of unknown) if (!tuningOf.has(row.name)) tuningOf.set(row.name, "");
  const missing = [...new Set(unknown.map((r) => tuningOf.get(r.name)).filter((id) => id && !tuningJobs.has(id)))];
  await Promise.all(missing.map(async (id) => {
    const job = await get(`/v1/${parent()}/hyperparameterTuningJobs/${encodeURIComponent(id)}`).catch(() => null);
    tuningJobs.set(id, job || { name: `${parent()}/hyperparameterTuningJobs/${id}`, displayName: `tuning job ${id} (deleted)` });
  }));
}

/** The report's rows with each tuning job's trials replaced by one row of their sums, in the place of its
 * first trial; the trials ride along as `trials`. */
export function rollUp(rows, parentOf, jobOf) {
  const out = [];
  const groups = new Map();
  for (const row of rows) {
    const id = parentOf(row);
    if (!id) {
      out.push(row);
      continue;
    }
    let group = groups.get(id);
    if (!group) {
      const job = jobOf(id) || {};
      group = { kind: "tuningJob", name: job.name || id, displayName: job.displayName || id, state: job.state, tuningJobId: id, spot: false, trials: [] };
      for (const key of SUMMED) group[key] = 0;
      groups.set(id, group);
      out.push(group);
    }
    group.trials.push(row);
    group.spot ||= Boolean(row.spot);
    for (const key of SUMMED) group[key] += Number(row[key] || 0);
  }
  return out;
}

export async function render(main, _params, ctx) {
  const view = viewOf(ctx.query, DEFAULTS);
  const section = h("section", { id: "costs-page", "aria-labelledby": "costs-title" });
  const by = h("select", { id: "costs-by", name: "by" },
    h("option", { value: "job", selected: view.by === "job" }, "Custom job"),
    h("option", { value: "resource", selected: view.by === "resource" }, "Persistent resource"));
  const filter = h("input", { id: "costs-filter", name: "filter", type: "text", size: "40", value: view.filter, placeholder: 'state=JOB_STATE_SUCCEEDED' });
  const form = h("form.filters", { role: "search", "aria-label": "Costs report" },
    h("label", {}, "By ", by), h("label", {}, "Filter ", filter), h("button", { type: "submit" }, "Apply"));
  const summary = h("div");
  const holder = h("div.table-holder");
  const open = new Set(); // the tuning jobs whose trials are shown
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    go(hashOf("costs", { by: by.value, filter: filter.value }, DEFAULTS));
  });
  by.addEventListener("change", () => form.requestSubmit());
  clear(main, section);
  section.append(h("h1", { id: "costs-title" }, "Costs"), form, summary, holder);

  const link = (r) => (r.kind === "persistentResource" ? `#/resources/${idOf(r.name)}`
    : r.kind === "tuningJob" ? `#/tuning/${encodeURIComponent(r.tuningJobId)}` : `#/jobs/${idOf(r.name)}`);

  function nameCell(r) {
    const name = h("a", { href: link(r) }, r.displayName || idOf(r.name));
    if (r.kind !== "tuningJob") return name;
    const shown = open.has(r.tuningJobId);
    const toggle = h("button.small", { type: "button", "aria-expanded": String(shown), "data-tuning": r.tuningJobId },
      `${shown ? "Hide" : "Show"} ${r.trials.length} trial${r.trials.length === 1 ? "" : "s"}`);
    toggle.addEventListener("click", () => {
      if (open.has(r.tuningJobId)) open.delete(r.tuningJobId);
      else open.add(r.tuningJobId);
      draw();
    });
    return [name, " ", h("span.muted", {}, "tuning job"), " ", toggle];
  }

  let last = null;
  function draw() {
    if (!last) return;
    const rows = view.by === "job" ? rollUp(last.rows || [], (r) => tuningOf.get(r.name), (id) => tuningJobs.get(id)) : last.rows || [];
    const shown = rows.flatMap((r) => (r.kind === "tuningJob" && open.has(r.tuningJobId) ? [r, ...r.trials.map((t) => ({ ...t, trialOf: r.tuningJobId }))] : [r]));
    const t = table(`Costs by ${view.by}`, [
      { label: "Name", cell: nameCell },
      { label: "State", cell: (r) => (r.state ? badge(r.state) : "—") },
      { label: "Spot", cell: (r) => (r.spot ? "yes" : "no") },
      { label: "Machine-hours", cell: (r) => hours(r.machineHours), className: "num" },
      { label: "Cost", cell: (r) => usd(r.costUsd), className: "num" },
      { label: "On-demand equivalent", cell: (r) => usd(r.onDemandEquivalentUsd), className: "num" },
      { label: "Covered by resource", cell: (r) => (r.coveredUsd ? usd(r.coveredUsd) : "—"), className: "num" },
    ], shown, { rowKey: (r) => r.name, onOpen: (r) => (location.hash = link(r)), empty: "Nothing billed." });
    t.id = "costs-table";
    for (const [i, tr] of [...t.querySelectorAll("tbody tr[data-key]")].entries()) {
      if (shown[i].kind === "tuningJob") tr.classList.add("group-row");
      if (shown[i].trialOf) tr.classList.add("trial-row");
    }
    const focused = document.activeElement?.dataset?.tuning;
    clear(holder, t);
    if (focused) holder.querySelector(`button[data-tuning="${CSS.escape(focused)}"]`)?.focus();
  }

  async function load() {
    const report = await get(`/trainworks/v1/${parent()}/costs${query({ by: view.by, filter: view.filter })}`);
    if (view.by === "job") await classify(report.rows || []);
    if (!ctx.active) return;
    const totals = report.totals || {};
    clear(summary,
      facts([
        ["Total cost", usd(totals.costUsd)],
        ["On-demand equivalent", usd(totals.onDemandEquivalentUsd)],
        ["Machine-hours", hours(totals.machineHours)],
        ["Rows", String(totals.count ?? 0)],
      ]),
      h("p.muted", {}, report.pricing || ""));
    last = report;
    draw();
    section.dataset.ready = "true";
  }
  await ctx.live(load, 5000);
}
