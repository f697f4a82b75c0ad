// Hyperparameter tuning jobs: the list, and a job's trials with two plots: the metric per trial with the
// best so far, and each parameter against the metric.

import { del, get, idOf, parent, post, query } from "../api.js";
import { scatter } from "../plot.js";
import {
  actionButton, age, badge, clear, facts, h, isTerminal, json, runTime, statusError, table, when,
} from "../ui.js";

const view = { tokens: [""] };

export async function renderList(main, _params, ctx) {
  const section = h("section", { id: "tuning-page", "aria-labelledby": "tuning-title" });
  const holder = h("div.table-holder");
  const pager = h("nav.pager", { "aria-label": "Pages" });
  clear(main, section);
  section.append(h("h1", { id: "tuning-title" }, "Hyperparameter tuning jobs"), holder, pager);

  async function load() {
    const token = view.tokens[view.tokens.length - 1];
    const page = await get(`/v1/${parent()}/hyperparameterTuningJobs${query({ pageSize: 50, pageToken: token })}`);
    if (!ctx.active) return;
    const jobs = page.hyperparameterTuningJobs || [];
    const now = Date.now();
    const t = table("Tuning jobs, newest first", [
      { label: "Name", cell: (j) => h("a", { href: `#/tuning/${idOf(j.name)}` }, j.displayName || idOf(j.name)) },
      { label: "State", cell: (j) => badge(j.state) },
      { label: "Trials", cell: (j) => `${(j.trials || []).length} / ${j.maxTrialCount || "?"}`, className: "num" },
      { label: "Age", cell: (j) => age(j.createTime, now) },
      { label: "Duration", cell: (j) => runTime(j.startTime, j.endTime, now) },
    ], jobs, { rowKey: (j) => j.name, onOpen: (j) => (location.hash = `#/tuning/${idOf(j.name)}`), empty: "No tuning jobs." });
    t.id = "tuning-table";
    clear(holder, t);
    const previous = h("button", { type: "button", disabled: view.tokens.length === 1 }, "Previous page");
    previous.addEventListener("click", () => { view.tokens.pop(); load(); });
    const next = h("button", { type: "button", disabled: !page.nextPageToken }, "Next page");
    next.addEventListener("click", () => { view.tokens.push(page.nextPageToken); load(); });
    clear(pager, previous, next);
    section.dataset.ready = "true";
  }
  await ctx.live(load, 3000);
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

export async function renderDetail(main, [jobId], ctx) {
  const resource = `/v1/${parent()}/hyperparameterTuningJobs/${encodeURIComponent(jobId)}`;
  const page = h("section", { id: "tuning-job-page", "aria-labelledby": "tuning-job-title" });
  const title = h("h1", { id: "tuning-job-title" }, `Tuning job ${jobId}`);
  const actions = h("div.actions");
  const body = h("div");
  clear(main, page);
  page.append(h("p", {}, h("a", { href: "#/tuning" }, "← Tuning jobs")), title, actions, body);
  let rendered = "";

  async function load() {
    const job = await get(resource);
    if (!ctx.active) return;
    const key = JSON.stringify(job);
    if (key === rendered) return;
    rendered = key;
    clear(title, job.displayName || jobId, " ", badge(job.state));
    const buttons = [];
    if (!isTerminal(job.state)) {
      buttons.push(actionButton("Cancel job", `Cancel tuning job ${jobId} and its running trials?`, async () => {
        await post(`${resource}:cancel`);
        await load();
      }, { confirmLabel: "Cancel job" }));
    }
    buttons.push(actionButton("Delete job", `Delete tuning job ${jobId}?`, async () => {
      await del(resource);
      location.hash = "#/tuning";
    }));
    clear(actions, buttons);

    const metric = job.studySpec?.metrics?.[0] || {};
    const metricId = metric.metricId || "metric";
    const goal = metric.goal || "MAXIMIZE";
    const params = (job.studySpec?.parameters || []).map((p) => p.parameterId);
    const trials = job.trials || [];
    const measured = trials.map((t) => ({ trial: t, y: metricOf(t, metricId) })).filter((p) => p.y !== null && !Number.isNaN(p.y));
    const perTrial = measured.map((p) => ({ x: Number(p.trial.id), y: p.y, label: `trial ${p.trial.id}: ${p.y}` }));
    const plots = h("div.plots", { id: "tuning-plots" },
      h("figure", {}, scatter(perTrial, {
        title: `${metricId} per trial (${goal.toLowerCase()}), best so far as a line`,
        xLabel: "trial", yLabel: metricId, line: bestSoFar(perTrial, goal),
      }), h("figcaption", {}, `${metricId} per trial, with the best so far`)),
      params.map((id) => {
        const spec = job.studySpec.parameters.find((p) => p.parameterId === id);
        const points = measured
          .map((p) => ({ value: (p.trial.parameters || []).find((q) => q.parameterId === id)?.value, y: p.y, trial: p.trial.id }))
          .filter((p) => p.value !== undefined)
          .map((p) => ({ x: paramValue(p.value), y: p.y, label: `trial ${p.trial}: ${id}=${p.value}, ${metricId}=${p.y}` }));
        return h("figure", {}, scatter(points, {
          title: `${metricId} against ${id}`, xLabel: id, yLabel: metricId, logX: spec?.scaleType === "UNIT_LOG_SCALE",
        }), h("figcaption", {}, `${metricId} against ${id}`));
      }),
    );
    const trialTable = table("Trials", [
      { label: "Trial", cell: (t) => String(t.id), className: "num" },
      { label: "State", cell: (t) => badge(t.state) },
      ...params.map((id) => ({ label: id, cell: (t) => short((t.parameters || []).find((p) => p.parameterId === id)?.value), className: "num" })),
      { label: metricId, cell: (t) => short(metricOf(t, metricId)), className: "num" },
      { label: "Duration", cell: (t) => runTime(t.startTime, t.endTime) },
      { label: "Job", cell: (t) => (t.customJob ? h("a", { href: `#/jobs/${idOf(t.customJob)}` }, idOf(t.customJob)) : "—") },
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
    page.dataset.ready = "true";
  }
  await ctx.live(load, 3000);
}
