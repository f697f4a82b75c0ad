// Hyperparameter tuning jobs: the list, and a job's trials with two plots: the metric per trial with the
// best so far, and each parameter against the metric.

import { cliScope, get } from "../api.js";
import { scatter } from "../plot.js";
import { age, badge, clear, emptyState, facts, h, isTerminal, json, runTime, statusError, table, when } from "../ui.js";
import { JOB_STATES } from "./jobs.js";
import { cancelButton, deleteButton, detailPage, idLink, nameColumn, pagedList } from "./list.js";

const TUNING = {
  section: "tuning", title: "Hyperparameter tuning jobs", noun: "Tuning job", api: "v1", collection: "hyperparameterTuningJobs",
  filterable: true, states: JOB_STATES,
};

// The list response carries no trials (as Vertex's): each visible row's count comes from its job. An
// ended job's count is final, so it is asked once; a live job's at each refresh.
const trialCounts = new Map(); // job name -> { count, final }

function trialsText(job) {
  const known = trialCounts.get(job.name);
  return `${known ? known.count : "…"} / ${job.maxTrialCount || "?"}`;
}

async function fillTrialCounts(rows, holder) {
  const wanted = rows.filter((j) => !trialCounts.get(j.name)?.final);
  await Promise.all(wanted.map(async (j) => {
    const full = await get(`/v1/${j.name}`).catch(() => null);
    if (full) trialCounts.set(j.name, { count: (full.trials || []).length, final: isTerminal(full.state) });
  }));
  for (const j of rows) {
    const cell = holder.querySelector(`tr[data-key="${CSS.escape(j.name)}"] td.trials`);
    if (cell) cell.textContent = trialsText(j);
  }
  holder.querySelector("table")?.setAttribute("data-trials", "true");
}

export function renderList(main, _params, ctx) {
  return pagedList(main, ctx, TUNING, {
    titleId: "tuning-title",
    tableId: "tuning-table",
    caption: "Tuning jobs, newest first",
    empty: emptyState("tuning jobs", `trainworks hp-tuning-jobs create ${cliScope()} --display-name tune --config hp.yaml`),
    fill: fillTrialCounts,
    columns: [
      nameColumn(TUNING),
      { label: "State", cell: (j) => badge(j.state) },
      { label: "Trials", cell: trialsText, className: "num trials" },
      { label: "Age", cell: (j, now) => age(j.createTime, now) },
      { label: "Duration", cell: (j, now) => runTime(j.startTime, j.endTime, now) },
    ],
  });
}

function metricOf(trial, metricId) {
  const metrics = trial.finalMeasurement?.metrics || [];
  const found = metrics.find((m) => m.metricId === metricId) || metrics[0];
  return found === undefined ? null : Number(found.value);
}

// Numbers (double, integer, discrete) plot on a numeric axis; categorical values as categories.
function paramValue(value) {
  return typeof value === "number" ? value : String(value);
}

// Six significant digits in the table; the full value is in the plots' tooltips and the JSON.
function short(value) {
  if (value === undefined || value === null) return "—";
  return typeof value === "number" && !Number.isInteger(value) ? String(Number(value.toPrecision(6))) : String(value);
}

/** Best so far along trial order, for the goal (MAXIMIZE or MINIMIZE). */
export function bestSoFar(points, goal) {
  const out = [];
  let best = null;
  for (const p of points) {
    if (best === null || (goal === "MINIMIZE" ? p.y < best : p.y > best)) best = p.y;
    out.push({ x: p.x, y: best });
  }
  return out;
}

export function renderDetail(main, [jobId], ctx) {
  return detailPage(main, ctx, TUNING, jobId, {
    id: "tuning-job-page",
    titleId: "tuning-job-title",
    heading: `Tuning job ${jobId}`,
    backLabel: "Tuning jobs",
    render: (job, parts) => renderJob(job, jobId, parts),
  });
}

/** The job's title, cancel/delete, facts, plots, trials and spec. */
function renderJob(job, jobId, { title, actions, body, path, reload }) {
  clear(title, job.displayName || jobId, " ", badge(job.state));
  // Cancel while it runs; delete once it has ended (the API refuses deleting a running one).
  const active = !isTerminal(job.state) && job.state !== "JOB_STATE_CANCELLING";
  clear(actions,
    active ? cancelButton("Cancel job", `Cancel tuning job ${jobId} and its running trials?`, path, reload) : null,
    isTerminal(job.state) ? deleteButton("Delete job", `Delete tuning job ${jobId}?`, path, "#/tuning") : null);

  const metric = job.studySpec?.metrics?.[0] || {};
  const metricId = metric.metricId || "metric";
  const goal = metric.goal || "MAXIMIZE";
  const params = (job.studySpec?.parameters || []).map((p) => p.parameterId);
  const trials = job.trials || [];
  const measured = trials.map((t) => ({ trial: t, y: metricOf(t, metricId) })).filter((p) => p.y !== null && !Number.isNaN(p.y));
  const perTrial = measured.map((p) => ({ x: Number(p.trial.id), y: p.y, label: `trial ${p.trial.id}: ${p.y}` }));
  const plots = h("div.plots", { id: "tuning-plots" },
    scatter(perTrial, {
      title: `${metricId} per trial (${goal.toLowerCase()}), best so far as a line`,
      xLabel: "trial", yLabel: metricId, line: bestSoFar(perTrial, goal), integerX: true,
      caption: `${metricId} per trial, with the best so far. Drag to zoom, double-click to zoom out.`,
    }),
    params.map((id) => {
      const spec = job.studySpec.parameters.find((p) => p.parameterId === id);
      const points = measured
        .map((p) => ({ value: (p.trial.parameters || []).find((q) => q.parameterId === id)?.value, y: p.y, trial: p.trial.id }))
        .filter((p) => p.value !== undefined)
        .map((p) => ({ x: paramValue(p.value), y: p.y, label: `trial ${p.trial}: ${id}=${p.value}, ${metricId}=${p.y}` }));
      return scatter(points, {
        title: `${metricId} against ${id}`, xLabel: id, yLabel: metricId, logX: spec?.scaleType === "UNIT_LOG_SCALE",
        caption: `${metricId} against ${id}`,
      });
    }),
  );
  const trialTable = table("Trials", [
    { label: "Trial", cell: (t) => String(t.id), className: "num" },
    { label: "State", cell: (t) => badge(t.state) },
    ...params.map((id) => ({ label: id, cell: (t) => short((t.parameters || []).find((p) => p.parameterId === id)?.value), className: "num" })),
    { label: metricId, cell: (t) => short(metricOf(t, metricId)), className: "num" },
    { label: "Duration", cell: (t) => runTime(t.startTime, t.endTime) },
    { label: "Job", cell: (t) => (t.customJob ? idLink("jobs", t.customJob) : "—") },
  ], trials, { empty: "No trials yet." });
  trialTable.id = "trials-table";
  clear(body,
    statusError(job.error),
    facts([
      ["Name", h("span.mono", {}, job.name)],
      ["Created", when(job.createTime)],
      ["Duration", runTime(job.startTime, job.endTime)],
      ["Metric", `${metricId} (${goal.toLowerCase()})`],
      ["Trials", `${trials.length} of ${job.maxTrialCount}, ${job.parallelTrialCount || 1} in parallel`],
    ]),
    h("section", { "aria-labelledby": "plots-title" }, h("h2", { id: "plots-title" }, "Plots"), plots),
    h("section", { "aria-labelledby": "trials-title" }, h("h2", { id: "trials-title" }, "Trials"), trialTable),
    h("details", {}, h("summary", {}, "Study and trial spec"), json({ studySpec: job.studySpec, trialJobSpec: job.trialJobSpec })),
  );
}
