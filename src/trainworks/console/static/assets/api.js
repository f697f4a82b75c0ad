// The REST client of the console: the same /v1, /v1beta1 and /trainworks/v1 API the other clients use.
// The API token (when the server has tokens) lives in sessionStorage and goes out as a bearer header.

const TOKEN_KEY = "trainworks.token";
const SCOPE_KEY = "trainworks.scope";

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export function scope() {
  let saved = {};
  try {
    saved = JSON.parse(localStorage.getItem(SCOPE_KEY) || "{}");
  } catch {
    saved = {};
  }
  return { project: saved.project || "", location: saved.location || "us-central1" };
}

export function setScope(project, location) {
  localStorage.setItem(SCOPE_KEY, JSON.stringify({ project, location }));
}

/** Sets the scope to the server's default project and location (/console/defaults.json), when it says. */
export async function loadDefaultScope() {
  try {
    const response = await fetch("/console/defaults.json", { headers: { Accept: "application/json" } });
    if (!response.ok) return;
    const defaults = await response.json();
    if (defaults.project) setScope(defaults.project, defaults.location || "us-central1");
  } catch {
    // An older server without the route: the "Choose a project" page asks instead.
  }
}

/** The CLI flags of the chosen scope, for the command lines the pages show. */
export function cliScope() {
  const { project, location } = scope();
  return `--project ${project} --region ${location}`;
}

/** `projects/P/locations/L` of the chosen scope. */
export function parent() {
  const { project, location } = scope();
  return `projects/${encodeURIComponent(project)}/locations/${encodeURIComponent(location)}`;
}

/** The last segment of a resource name: its ID. */
export function idOf(name) {
  return String(name || "").split("/").pop();
}

function headers(extra = {}) {
  const out = { Accept: "application/json", ...extra };
  const t = token();
  if (t) out.Authorization = `Bearer ${t}`;
  return out;
}

// One prompt at a time, however many requests were refused together.
let asking = null;

function askToken(reason) {
  if (asking) return asking;
  const dialog = document.getElementById("token-dialog");
  const input = document.getElementById("token-input");
  document.getElementById("token-reason").textContent = reason;
  input.value = token();
  asking = new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        asking = null;
        if (dialog.returnValue === "ok" && input.value.trim()) {
          setToken(input.value.trim());
          resolve(true);
        } else {
          resolve(false);
        }
      },
      { once: true },
    );
    dialog.showModal();
    input.focus();
  });
  return asking;
}

export function promptToken() {
  return askToken("Enter the server's API token. It is kept for this browser tab only.");
}

async function errorOf(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const message = body?.error?.message || `${response.status} ${response.statusText}`;
  return new ApiError(response.status, message, body);
}

function refusedForToken(error) {
  return error.status === 403 && error.body?.error?.status === "PERMISSION_DENIED" && /API key|bearer/i.test(error.message);
}

/** A JSON request; a 403 for a missing or wrong token asks for one and retries once. */
export async function request(method, path, body, { retry = true, signal } = {}) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }), signal };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  if (response.ok) {
    const text = await response.text();
    return text ? JSON.parse(text) : {};
  }
  const error = await errorOf(response);
  if (retry && refusedForToken(error) && (await askToken(error.message))) {
    return request(method, path, body, { retry: false, signal });
  }
  throw error;
}

export const get = (path, options) => request("GET", path, undefined, options);
export const post = (path, body = {}) => request("POST", path, body);
export const del = (path) => request("DELETE", path);

/** Query string from an object, skipping empty values. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

/** Reads an NDJSON stream (the logs extension) as it comes, calling onLines with each chunk's complete lines
 * (parsed), until it ends or `signal` aborts it. */
export async function streamNdjson(path, onLines, signal) {
  const response = await fetch(path, { headers: headers({ Accept: "application/x-ndjson" }), signal });
  if (!response.ok) throw await errorOf(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    pending += decoder.decode(value, { stream: true });
    const cut = pending.lastIndexOf("\n");
    if (cut < 0) continue;
    const text = pending.slice(0, cut);
    pending = pending.slice(cut + 1);
    onLines(text.split("\n").filter((line) => line.trim()).map((line) => JSON.parse(line)));
  }
  if (pending.trim()) onLines([JSON.parse(pending)]);
}
