// The console's shell: hash routing (#/jobs, #/jobs/<id>, ...), the project/location scope, the token
// button, and each page's lifetime (its polling and streams stop when the user leaves it).

import { loadDefaultScope, promptToken, scope, setScope } from "./api.js";
import { clear, errorBox, h, showBanner } from "./ui.js";

// Pages load on first use (dynamic import): a first visit fetches only the modules its page needs.
const page = (load, name) => async (...args) => (await load())[name](...args);

/** A section's two routes: #/<name> shows `list`, #/<name>/<id> shows `detail`; both mark its nav link. */
const sectionRoutes = (name, list, detail) => [
  [new RegExp(`^/${name}$`), list, name],
  [new RegExp(`^/${name}/([^/]+)$`), detail, name],
];
/** A resource kind's section, whose page module exports renderList and renderDetail. */
const kindRoutes = (name, load) => sectionRoutes(name, page(load, "renderList"), page(load, "renderDetail"));

const ROUTES = [
  ...sectionRoutes("jobs", page(() => import("./pages/jobs.js"), "render"), page(() => import("./pages/job.js"), "render")),
  ...kindRoutes("tuning", () => import("./pages/tuning.js")),
  ...kindRoutes("resources", () => import("./pages/resources.js")),
  ...kindRoutes("clusters", () => import("./pages/clusters.js")),
  ...kindRoutes("pipelines", () => import("./pages/pipelines.js")),
  ...kindRoutes("models", () => import("./pages/models.js")),
  [/^\/costs$/, page(() => import("./pages/costs.js"), "render"), "costs"],
  [/^\/terminal\/([^/]+)\/([^/]+)\/([^/]+)\/([^/]+)$/, page(() => import("./pages/terminal.js"), "render"), ""],
];
const NEEDS_SCOPE = new Set(["jobs", "tuning", "resources", "clusters", "pipelines", "models", "costs"]);

/** A page's lifetime: cleanups run when the route changes. */
class PageContext {
  constructor(query) {
    this.query = query;
    this.cleanups = [];
    this.active = true;
  }

  onCleanup(fn) {
    this.cleanups.push(fn);
  }

  /** Runs fn now and then every `ms` after each run finishes, until the page goes away. */
  live(fn, ms = 2000) {
    let timer = null;
    const tick = async () => {
      if (!this.active) return;
      try {
        await fn();
      } catch (error) {
        if (this.active && error.name !== "AbortError") showBanner(`Refresh failed: ${error.message}`);
      }
      if (this.active) timer = setTimeout(tick, ms);
    };
    this.onCleanup(() => clearTimeout(timer));
    return tick();
  }

  close() {
    this.active = false;
    for (const fn of this.cleanups.splice(0)) fn();
  }
}

const main = () => document.getElementById("main");
let current = null;
let currentPath = "";

/** The route: the hash when there is one, else the path under /console/ (webAccessUris use paths). */
function routeOf() {
  const hash = location.hash.replace(/^#/, "");
  let path = hash;
  let search = "";
  if (hash) {
    const at = hash.indexOf("?");
    if (at >= 0) [path, search] = [hash.slice(0, at), hash.slice(at + 1)];
  } else {
    path = location.pathname.replace(/^\/console/, "").replace(/\/$/, "") || "/jobs";
    search = location.search.replace(/^\?/, "");
  }
  return { path: path || "/jobs", query: new URLSearchParams(search) };
}

function syncScopeForm() {
  const { project, location: loc } = scope();
  document.getElementById("scope-project").value = project;
  document.getElementById("scope-location").value = loc;
}

async function navigate() {
  const { path, query } = routeOf();
  // A new query on the same page (a filter, the next page): the control the user was on keeps the focus.
  const focused = path === currentPath && main().contains(document.activeElement) ? document.activeElement.id : "";
  currentPath = path;
  current?.close();
  showBanner("");
  // ?project=&location= in a link (or a test) sets the scope, so that links can be shared.
  if (query.get("project") || query.get("location")) {
    const saved = scope();
    setScope(query.get("project") || saved.project, query.get("location") || saved.location);
    syncScopeForm();
  }
  const context = new PageContext(query);
  current = context;
  for (const link of document.querySelectorAll("[data-nav]")) link.removeAttribute("aria-current");
  for (const [pattern, render, section] of ROUTES) {
    const match = path.match(pattern);
    if (!match) continue;
    if (section) document.querySelector(`[data-nav="${section}"]`)?.setAttribute("aria-current", "page");
    if (NEEDS_SCOPE.has(section) && !scope().project) {
      clear(main(), h("h1", {}, "Choose a project"),
        h("p", {}, "Enter a project ID (or number) and a location above to see its resources."));
      document.getElementById("scope-project").focus();
      return;
    }
    try {
      await render(main(), match.slice(1).map(decodeURIComponent), context);
      if (focused && context === current) document.getElementById(focused)?.focus();
    } catch (error) {
      if (context.active) clear(main(), h("h1", {}, "Something went wrong"), errorBox(error));
    }
    return;
  }
  clear(main(), h("h1", {}, "Not found"), h("p", {}, "No such page. "), h("a", { href: "#/jobs" }, "Go to custom jobs"));
}

async function start() {
  // A first visit opens on the server's default project (the one the CLI uses), not an empty page.
  if (!scope().project) await loadDefaultScope();
  syncScopeForm();
  document.getElementById("scope").addEventListener("submit", (event) => {
    event.preventDefault();
    setScope(
      document.getElementById("scope-project").value.trim(),
      document.getElementById("scope-location").value.trim() || "us-central1",
    );
    navigate();
  });
  document.getElementById("token-button").addEventListener("click", async () => {
    if (await promptToken()) navigate();
  });
  window.addEventListener("hashchange", navigate);
  // Pages change the URL with history.pushState (ui.go) and then ask for this: no hashchange comes.
  window.addEventListener("console-navigate", navigate);
  navigate();
}

start();
