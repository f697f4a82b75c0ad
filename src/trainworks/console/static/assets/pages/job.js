// One custom job: summary, actions (cancel, delete, preempt), why it is pending, its error, replicas with
// restarts and exit codes (the status extension), the state timeline, the spec, and its logs (the logs
// extension: paged, filtered, followed) in a windowed viewer.

import { del, get, parent, post, query, scope, token } from "../api.js";
import { LogView } from "../logview.js";
import {
  actionButton, badge, clear, duration, facts, h, isNotFound, isTerminal, json, notFound, parseTime, runTime,
  statusError, table, usd, when,
} from "../ui.js";
import { machineOf, TUNING_JOB_LABEL } from "./jobs.js";

/** Created, started, each restart (status.restarts), ended: in time order. */
export function timeline(job, status) {
  const events = [{ time: job.createTime, label: "Created", detail: "" }];
  if (job.startTime) events.push({ time: job.startTime, label: "Started", detail: "" });
  for (const entry of status?.restarts || []) {
    events.push({
      time: entry.time,
      label: `Restarted (${String(entry.kind || "restart").toLowerCase()})`,
      detail: `attempt ${entry.attempt}${entry.reason ? ": " + entry.reason : ""}`,
    });
  }
  if (job.endTime) events.push({ time: job.endTime, label: `Ended: ${job.state.replace("JOB_STATE_", "").toLowerCase()}`, detail: "" });
  return events.filter((e) => e.time).sort((a, b) => parseTime(a.time) - parseTime(b.time));
}

function replicasTable(status) {
  const columns = [
    { label: "Replica", cell: (r) => r.task, className: "mono" },
    { label: "Attempt", cell: (r) => String(r.attempt), className: "num" },
    { label: "Phase", cell: (r) => h("span", { "data-phase": r.phase }, r.phase) },
    { label: "Restarts", cell: (r) => String(r.restarts ?? 0), className: "num" },
    { label: "Exit code", cell: (r) => (r.exitCode === undefined ? "—" : String(r.exitCode)), className: "num" },
    { label: "Address", cell: (r) => r.address || "—", className: "mono" },
    { label: "Ran for", cell: (r) => runTime(r.startTime, r.endTime) },
    { label: "Detail", cell: (r) => [r.detail || "", r.preempted ? " (preempted)" : ""] },
  ];
  const t = table("Replicas (all attempts)", columns, status?.replicas || [], { empty: "No replica has been placed yet." });
  t.id = "replicas-table";
  return t;
}

function timelineList(job, status) {
  const events = timeline(job, status);
  const start = parseTime(job.createTime);
  return h(
    "ol.timeline",
    { id: "timeline" },
    events.map((e) =>
      h("li", {}, when(e.time), " ", h("strong", {}, e.label), e.detail ? ` — ${e.detail}` : "",
        h("span.muted", {}, ` (+${duration(parseTime(e.time) - start)})`)),
    ),
  );
}

function webAccess(job) {
  const uris = job.webAccessUris || {};
  const keys = Object.keys(uris).sort();
  if (!keys.length) return null;
  return h(
    "section",
    { "aria-labelledby": "web-title" },
    h("h2", { id: "web-title" }, "Web terminals"),
    h("ul", { id: "web-terminals" }, keys.map((k) => h("li", {}, h("a", { href: uris[k], "data-replica": k }, `Terminal on ${k}`)))),
  );
}

/** Where the job's TensorBoard logs are (the tensorboard extension) and how to launch TensorBoard on them. */
function tensorboardSection(info, jobId) {
  if (!info) return null;
  const { project, location: loc } = scope();
  const command = `trainworks tensorboard ${jobId} --project ${project} --region ${loc}`;
  return h(
    "section",
    { id: "tensorboard", "aria-labelledby": "tensorboard-title" },
    h("h2", { id: "tensorboard-title" }, "TensorBoard"),
    facts([
      ["Log directory", h("span.mono", {}, info.logDir)],
      ["On this server", info.localPath ? h("span.mono", {}, info.localPath) : ""],
      ["Launch", h("code", {}, command)],
    ]),
    h("p", {}, h("a", { href: "http://127.0.0.1:6006/", target: "_blank", rel: "noopener" }, "Open TensorBoard"),
      " (on port 6006 of the machine where you launched it)."),
  );
}

const SEVERITIES = ["DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL"];

/** The logs panel: filters (replica, minimum severity, text: the endpoint's own), follow, jumps to either
 * end, downloads of the whole log, and the windowed view of the lines (logview.js). */
function logsPanel(base, ctx) {
  const select = h("select", { id: "log-task", name: "task" }, h("option", { value: "" }, "All replicas"));
  const severity = h("select", { id: "log-severity", name: "severity" },
    h("option", { value: "" }, "Any"), SEVERITIES.map((s) => h("option", { value: s }, s)));
  const search = h("input", { id: "log-search", type: "search", name: "q", placeholder: "text in the line", autocomplete: "off" });
  const follow = h("input", { id: "log-follow", type: "checkbox" });
  const state = h("p.muted", { id: "log-state", role: "status" });
  const loaded = h("span.muted", { id: "log-loaded" });
  let said = null;
  const view = new LogView(base, {
    onState: (text, count) => {
      if (text !== said) state.textContent = said = text;  // a live region: only when the activity changes
      loaded.textContent = `${count.toLocaleString("en-US")} lines loaded`;
    },
  });
  ctx.onCleanup(() => view.close());

  const download = (format) => {
    const link = h("a", { id: format ? "log-download-text" : "log-download", download: "" },
      format ? "Download (text)" : "Download (NDJSON)");
    const href = () => `${base}/logs${query({ download: "true", format })}`;
    link.href = href();
    // The link carries the API token only when followed: it is not left in the page.
    link.addEventListener("click", () => {
      link.href = token() ? `${href()}&key=${encodeURIComponent(token())}` : href();
      setTimeout(() => { link.href = href(); }, 0);
    });
    return link;
  };

  let typing = null;
  const filters = () => ({ task: select.value, severity: severity.value, q: search.value.trim() });
  select.addEventListener("change", () => view.setFilters(filters()));
  severity.addEventListener("change", () => view.setFilters(filters()));
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => view.setFilters(filters()), 300);
  });
  search.addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return;
    clearTimeout(typing);
    view.setFilters(filters());
  });
  ctx.onCleanup(() => clearTimeout(typing));
  follow.addEventListener("change", () => view.setFollow(follow.checked));
  const top = h("button", { type: "button", id: "log-top" }, "Start");
  const end = h("button", { type: "button", id: "log-end" }, "End");
  top.addEventListener("click", () => {
    follow.checked = false;
    view.setFollow(false);
    view.jumpTop();
  });
  end.addEventListener("click", () => view.jumpEnd());

  const panel = h(
    "section",
    { id: "logs-panel", "aria-labelledby": "logs-title" },
    h("h2", { id: "logs-title" }, "Logs"),
    h("div.filters", {},
      h("label", {}, "Replica ", select),
      h("label", {}, "Severity at least ", severity),
      h("label", {}, "Search ", search),
      h("label", {}, follow, " Follow"),
      h("span.actions", {}, top, end),
      h("span.actions", {}, download(""), download("text")),
    ),
    h("div.log-status", {}, state, loaded),
    view.element,
    h("p.muted.hint", {}, "Times are UTC. In the log: arrows and Page Up/Down scroll, Home and End go to its start and end."),
  );

  function setTasks(tasks) {
    const known = new Set([...select.options].map((o) => o.value));
    for (const task of tasks) if (!known.has(task)) select.append(h("option", { value: task }, task));
  }

  /** The first view: a running job's end, followed; an ended job's start. */
  function open(jobState) {
    const ended = isTerminal(jobState);
    view.setEnded(ended);
    follow.checked = !ended;
    view.follow = !ended;
    view.start();
  }

  return { panel, open, setTasks, setEnded: (jobState) => view.setEnded(isTerminal(jobState)) };
}

export async function render(main, [jobId], ctx) {
  const base = `/trainworks/v1/${parent()}/customJobs/${encodeURIComponent(jobId)}`;
  const resource = `/v1/${parent()}/customJobs/${encodeURIComponent(jobId)}`;
  const page = h("section", { id: "job-page", "aria-labelledby": "job-title" });
  const title = h("h1", { id: "job-title" }, `Custom job ${jobId}`);
  const actions = h("div.actions", { id: "job-actions" });
  const body = h("div");
  const logs = logsPanel(base, ctx);
  clear(main, page);
  page.append(h("p", {}, h("a", { href: "#/jobs" }, "← Custom jobs")), title, actions, body, logs.panel);

  let rendered = "";
  let logsOpen = false;
  let tensorboard = undefined;  // asked once, only for jobs with a baseOutputDirectory (else it is a 400)

  async function load() {
    let job;
    let status;
    try {
      [job, status] = await Promise.all([get(resource), get(`${base}/status`).catch(() => null)]);
    } catch (error) {
      if (!isNotFound(error) || !ctx.active) throw error;
      // An unknown ID, or a job deleted meanwhile: say so, and stop polling and following its logs.
      ctx.close();
      notFound(main, "Custom job", jobId, "#/jobs", "Custom jobs");
      return;
    }
    if (!ctx.active) return;
    if (tensorboard === undefined) {
      tensorboard = job.jobSpec?.baseOutputDirectory?.outputUriPrefix
        ? await get(`${base}/tensorboard`).catch(() => null)
        : null;
    }
    // Re-render only on change, so that focus and scrolling inside the page survive the polling.
    const key = JSON.stringify([job, status && { ...status, cost: undefined }]);
    if (key !== rendered) {
      rendered = key;
      clear(title, job.displayName || jobId, " ", badge(job.state));
      renderActions(job);
      renderBody(job, status);
      logs.setTasks((status?.replicas || []).map((r) => r.task));
    }
    const cost = page.querySelector("#job-cost");
    if (cost && status?.cost) cost.textContent = usd(status.cost.costUsd);
    page.dataset.state = job.state;
    page.dataset.ready = "true";
    if (!logsOpen) {
      logsOpen = true;
      logs.open(job.state);
    } else {
      logs.setEnded(job.state);
    }
  }

  function renderActions(job) {
    const buttons = [];
    if (!isTerminal(job.state) && job.state !== "JOB_STATE_CANCELLING") {
      buttons.push(actionButton("Cancel job", `Cancel custom job ${jobId}? Its replicas are stopped.`, async () => {
        await post(`${resource}:cancel`);
        await load();
      }, { confirmLabel: "Cancel job" }));
    }
    const spot = job.jobSpec?.scheduling?.strategy === "SPOT";
    if (spot && job.state === "JOB_STATE_RUNNING") {
      buttons.push(actionButton("Preempt (admin)", `Preempt the replicas of ${jobId} as a Spot reclaim would?`, async () => {
        await post(`${base}:preempt`, {});
        await load();
      }));
    }
    // Only an ended job can be deleted (the API refuses the others): cancel it first.
    if (isTerminal(job.state)) {
      buttons.push(actionButton("Delete job", `Delete custom job ${jobId}? This cannot be undone.`, async () => {
        await del(resource);
        location.hash = "#/jobs";
      }));
    }
    clear(actions, buttons);
  }

  function renderBody(job, status) {
    const pending = status?.waitingReason
      ? h("section.notice", { id: "waiting", "aria-labelledby": "waiting-title" },
          h("h2", { id: "waiting-title" }, "Why pending"), h("p", {}, status.waitingReason))
      : null;
    clear(
      body,
      pending,
      statusError(job.error),
      facts([
        ["Name", h("span.mono", {}, job.name)],
        ["State", badge(job.state)],
        ["Created", when(job.createTime)],
        ["Started", job.startTime ? when(job.startTime) : ""],
        ["Ended", job.endTime ? when(job.endTime) : ""],
        ["Duration", runTime(job.startTime, job.endTime)],
        ["Cost", h("span", { id: "job-cost" }, status?.cost ? usd(status.cost.costUsd) : "—")],
        ["Attempt", status ? String(status.attempt) : ""],
        ["Zone", status?.zone || ""],
        ["Machine type", machineOf(job)],
        ["Tuning job", job.labels?.[TUNING_JOB_LABEL]
          ? h("a", { href: `#/tuning/${encodeURIComponent(job.labels[TUNING_JOB_LABEL])}` }, job.labels[TUNING_JOB_LABEL])
          : ""],
        ["Labels", Object.entries(job.labels || {}).map(([k, v]) => `${k}=${v}`).join(", ")],
      ]),
      webAccess(job),
      tensorboardSection(tensorboard, jobId),
      h("section", { "aria-labelledby": "replicas-title" }, h("h2", { id: "replicas-title" }, "Replicas"), replicasTable(status)),
      h("section", { "aria-labelledby": "timeline-title" }, h("h2", { id: "timeline-title" }, "Timeline"), timelineList(job, status)),
      h("section", { "aria-labelledby": "spec-title" },
        h("details", {}, h("summary", { id: "spec-title" }, "Job spec"), json(job.jobSpec))),
    );
  }

  await ctx.live(load, 2000);
}
