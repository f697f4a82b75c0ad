// DOM helpers, formatting and the confirm dialog shared by the pages.

/** Adds the stylesheet at `href` to the page once (a vendored library's CSS, loaded with its module). */
export function stylesheet(href) {
  if (document.querySelector(`link[rel="stylesheet"][href="${href}"]`)) return;
  document.head.append(h("link", { rel: "stylesheet", href }));
}

/** Goes to `hash` as a new history entry carrying `state` (kept across reloads, restored by back/forward);
 * the shell (app.js) renders it. */
export function go(hash, state = null) {
  history.pushState(state, "", hash);
  window.dispatchEvent(new Event("console-navigate"));
}

/** h("tag.class", {attrs}, ...children): an element; strings become text nodes (never HTML). */
export function h(spec, attrs = {}, ...children) {
  const [tag, ...classes] = spec.split(".");
  const el = document.createElement(tag || "div");
  if (classes.length) el.className = classes.join(" ");
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const TERMINAL_STATES = new Set([
  "JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED",
  "PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED",
]);

export function isTerminal(state) {
  return TERMINAL_STATES.has(state);
}

/** JOB_STATE_RUNNING -> Running */
export function stateLabel(state) {
  if (!state) return "Unknown";
  const short = String(state).replace(/^(JOB_STATE_|PIPELINE_STATE_|STATE_|NODE_STATE_|EVENT_TYPE_)/, "");
  return short.charAt(0) + short.slice(1).toLowerCase().replaceAll("_", " ");
}

export function badge(state) {
  const kind = /SUCCEEDED|RUNNING|ACTIVE|READY/.test(state || "")
    ? "ok"
    : /FAILED|ERROR|EXPIRED/.test(state || "")
      ? "bad"
      : /CANCEL/.test(state || "")
        ? "muted"
        : "wait";
  return h(`span.badge.${kind}`, { "data-state": state || "" }, stateLabel(state));
}

export function parseTime(value) {
  if (!value) return null;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? null : ms;
}

/** 3 s, 4 min 5 s, 2 h 3 min, 5 d 1 h */
export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "—";
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const hours = Math.floor(m / 60);
  if (hours < 48) return `${hours} h ${m % 60} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

export function age(createTime, now = Date.now()) {
  const t = parseTime(createTime);
  return t === null ? "—" : duration(now - t);
}

/** From start to end (or now while it runs); a dash when it never started. */
export function runTime(startTime, endTime, now = Date.now()) {
  const start = parseTime(startTime);
  if (start === null) return "—";
  const end = parseTime(endTime);
  return duration((end ?? now) - start);
}

export function when(value) {
  const t = parseTime(value);
  return t === null ? "—" : h("time", { datetime: value, title: value }, new Date(t).toLocaleString());
}

export function usd(value) {
  if (value === undefined || value === null) return "—";
  return `$${Number(value).toFixed(Number(value) < 1 ? 4 : 2)}`;
}

export function hours(value) {
  if (value === undefined || value === null) return "—";
  return `${Number(value).toFixed(3)} h`;
}

export function json(value) {
  return h("pre.json", { tabindex: "0", "aria-label": "JSON" }, JSON.stringify(value, null, 2));
}

/** A table: columns [{label, cell(row) -> node|string, className?}], optional onOpen(row) for Enter/click. */
export function table(caption, columns, rows, { onOpen, rowKey, empty = "Nothing here yet." } = {}) {
  const body = h("tbody");
  for (const row of rows) {
    const tr = h("tr", rowKey ? { "data-key": rowKey(row) } : {});
    if (onOpen) {
      tr.tabIndex = 0;
      tr.classList.add("clickable");
      tr.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && event.target === tr) onOpen(row);
      });
      tr.addEventListener("click", (event) => {
        if (!event.target.closest("a, button, input, select")) onOpen(row);
      });
    }
    for (const column of columns) tr.append(h(`td${column.className ? "." + column.className : ""}`, {}, column.cell(row)));
    body.append(tr);
  }
  if (!rows.length) body.append(h("tr", {}, h("td.empty", { colspan: String(columns.length) }, empty)));
  return h(
    "table",
    {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c.label)))),
    body,
  );
}

/** A definition list from [label, value] pairs; pairs with an empty value are left out. */
export function facts(pairs) {
  const dl = h("dl.facts");
  for (const [label, value] of pairs) {
    if (value === undefined || value === null || value === "") continue;
    dl.append(h("dt", {}, label), h("dd", {}, value));
  }
  return dl;
}

export function showBanner(message) {
  const banner = document.getElementById("banner");
  if (!message) {
    banner.hidden = true;
    banner.textContent = "";
    return;
  }
  banner.hidden = false;
  banner.textContent = message;
}

/** The confirm dialog: resolves true when the user confirms. */
export function confirmAction(text, confirmLabel = "Confirm") {
  const dialog = document.getElementById("confirm-dialog");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-yes").textContent = confirmLabel;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    document.getElementById("confirm-no").focus();
  });
}

/** A button that confirms, runs the action and reports its error in the banner. */
export function actionButton(label, question, action, { danger = true, confirmLabel } = {}) {
  const button = h(`button${danger ? ".danger" : ""}`, { type: "button" }, label);
  button.addEventListener("click", async () => {
    if (!(await confirmAction(question, confirmLabel || label))) return;
    button.disabled = true;
    try {
      await action();
      showBanner("");
    } catch (error) {
      showBanner(`${label} failed: ${error.message}`);
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

export function errorBox(error) {
  return h("div.error", { role: "alert" }, h("strong", {}, "Error: "), error.message || String(error));
}

const CANCELLED = 1; // google.rpc.Code.CANCELLED: what the user asked for, not a failure

/** A google.rpc.Status as shown on a job: an error box, or a neutral note for a cancelled job. */
export function statusError(status) {
  if (!status || (!status.message && !status.code)) return null;
  if (status.code === CANCELLED) {
    return h("section.note", { id: "cancelled-note", "aria-labelledby": "note-title" },
      h("h2", { id: "note-title" }, "Cancelled"), h("p", {}, "It was stopped on request."),
      status.message ? h("p.muted", {}, status.message) : null);
  }
  return h(
    "section.error",
    { "aria-labelledby": "error-title" },
    h("h2", { id: "error-title" }, "Error"),
    h("p", {}, status.message || ""),
    status.code ? h("p.muted", {}, `code ${status.code}`) : null,
  );
}

/** A list's empty state: what is missing and the CLI line that creates the first one. */
export function emptyState(what, command) {
  return h("div.empty-state", {}, h("p", {}, `No ${what} yet. Create the first one from a shell:`),
    h("pre.cli", { tabindex: "0" }, h("code", {}, command)));
}

/** The page of a resource that does not exist (an unknown ID, or one deleted meanwhile). */
export function notFound(main, noun, resourceId, back, backLabel) {
  clear(main, h("section", { id: "not-found-page", "aria-labelledby": "not-found-title", dataset: { ready: "true" } },
    h("h1", { id: "not-found-title" }, `${noun} not found`),
    h("p", {}, `There is no ${noun.toLowerCase()} with ID `, h("code", {}, resourceId),
      " in this project and location. It may have been deleted, or belong to another project."),
    h("p", {}, h("a", { href: back }, `← ${backLabel}`))));
}

/** True for the API's answer to a missing resource. */
export function isNotFound(error) {
  return error?.status === 404;
}
