// What every list keeps in its URL (#/<section>?state=...&name=...&filter=...&pageSize=...&pageToken=...):
// its filters and page, so that a reload or back/forward shows the same view. A new view is a new history
// entry (ui.go); the tokens of the pages before the current one ride in that entry's state (a page token
// only leads forward). The custom jobs list and the kinds' lists (pages/list.js) build their forms and
// pagers here; the costs page keeps its report's options the same way.
//
// A view's fields are named by a `defaults` object, whose values also say how each is read from the URL:
// a string as it is, a number as a page size (a positive integer, at most 1000), a boolean as "1".

import { query } from "./api.js";
import { go, h, stateLabel } from "./ui.js";

export const DEFAULT_PAGE_SIZE = 50;
const PAGE_SIZES = [25, 50, 100, 200];

/** The view as the URL's query gives it: each field of `defaults`, else its default. */
export function viewOf(params, defaults) {
  const view = {};
  for (const [key, fallback] of Object.entries(defaults)) {
    const raw = params.get(key);
    if (typeof fallback === "boolean") view[key] = raw === "1";
    else if (typeof fallback === "number") {
      const n = Number(raw);
      view[key] = raw && Number.isInteger(n) && n > 0 ? Math.min(n, 1000) : fallback;
    } else view[key] = raw || fallback;
  }
  return view;
}

/** The hash of `section` showing `view`: only the fields that differ from their defaults, in their order. */
export function hashOf(section, view, defaults) {
  const params = {};
  for (const [key, fallback] of Object.entries(defaults)) {
    const value = view[key] ?? fallback;
    params[key] = value === fallback ? "" : typeof fallback === "boolean" ? "1" : value;
  }
  return `#/${section}${query(params)}`;
}

/** The fields of a list's view: the filters its API takes (states: the ones offered; none: no state filter),
 * a page size and page; `checks` adds boolean options, false by default. */
export function listDefaults({ filterable = false, states = null, checks = {} } = {}) {
  return {
    ...(states ? { state: "" } : {}),
    ...(filterable ? { name: "", filter: "" } : {}),
    pageSize: DEFAULT_PAGE_SIZE,
    ...Object.fromEntries(Object.keys(checks).map((key) => [key, false])),
    pageToken: "",
  };
}

/** The view's AIP-160 filter: its state, a display-name glob and the user's own expression, then `more`
 * terms, ANDed. */
export function filterText({ state = "", name = "", filter = "" }, more = []) {
  const terms = [];
  if (state) terms.push(`state=${state}`);
  const cleaned = name.replaceAll('"', "").trim();
  if (cleaned) terms.push(`display_name:"*${cleaned}*"`);
  if (filter.trim()) terms.push(`(${filter.trim()})`);
  return [...terms, ...more].join(" AND ");
}

/** Whether the view narrows the list (its empty state then says "none match", not how to create one). */
export function isFiltered(view) {
  return Boolean(view.state || view.name?.trim() || view.filter?.trim());
}

/** The page tokens before the view's page, from the history entry (none on the first page). */
export function earlierTokens(view) {
  return Array.isArray(history.state?.pageTokens) && view.pageToken ? history.state.pageTokens : [];
}

/**
 * The list's filter form for `view`: a state select (when `states`), name and filter inputs (when the view
 * has them), the page size and `checks` ({ field: label }) as checkboxes. Applying it goes to the first
 * page of the new view as a new history entry; a select or checkbox applies at once.
 */
export function filterForm(section, view, defaults, {
  label, states = [], checks = {}, placeholder = 'labels.team="vision" AND create_time>"2024-01-01T00:00:00Z"',
}) {
  const controls = [];
  const read = [];
  if ("state" in view) {
    const select = h("select", { id: "filter-state", name: "state" },
      h("option", { value: "" }, "Any state"),
      states.map((s) => h("option", { value: s, selected: view.state === s }, stateLabel(s).toLowerCase())));
    controls.push(h("label", {}, "State ", select));
    read.push(() => ({ state: select.value }));
  }
  if ("name" in view) {
    const input = h("input", { id: "filter-name", name: "name", type: "search", value: view.name, placeholder: "part of the name" });
    controls.push(h("label", {}, "Name contains ", input));
    read.push(() => ({ name: input.value }));
  }
  if ("filter" in view) {
    const input = h("input", { id: "filter-expr", name: "filter", type: "text", value: view.filter, size: "40", placeholder });
    controls.push(h("label", {}, "Filter ", input));
    read.push(() => ({ filter: input.value }));
  }
  const size = h("select", { id: "filter-size", name: "pageSize" },
    [...new Set([...PAGE_SIZES, view.pageSize])].sort((a, b) => a - b)
      .map((n) => h("option", { value: String(n), selected: view.pageSize === n }, String(n))));
  controls.push(h("label", {}, "Per page ", size));
  read.push(() => ({ pageSize: Number(size.value) }));
  for (const [key, text] of Object.entries(checks)) {
    const box = h("input", { id: `filter-${key}`, name: key, type: "checkbox", checked: view[key] });
    controls.push(h("label.inline-check", {}, box, text));
    read.push(() => ({ [key]: box.checked }));
  }
  const form = h("form.filters", { role: "search", "aria-label": label }, controls, h("button", { type: "submit" }, "Apply"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    go(hashOf(section, Object.assign({ ...view, pageToken: "" }, ...read.map((r) => r())), defaults));
  });
  for (const control of form.querySelectorAll("select, input[type=checkbox]")) {
    control.addEventListener("change", () => form.requestSubmit());
  }
  return form;
}

/** The previous/next buttons of the view's page; each is a new history entry carrying the earlier tokens. */
export function pagerButtons(section, view, defaults, nextPageToken) {
  const earlier = earlierTokens(view);
  const previous = h("button", { type: "button", id: "page-previous", disabled: !view.pageToken }, "Previous page");
  previous.addEventListener("click", () => {
    go(hashOf(section, { ...view, pageToken: earlier[earlier.length - 1] || "" }, defaults), { pageTokens: earlier.slice(0, -1) });
  });
  const next = h("button", { type: "button", id: "page-next", disabled: !nextPageToken }, "Next page");
  next.addEventListener("click", () => {
    go(hashOf(section, { ...view, pageToken: nextPageToken }, defaults), { pageTokens: [...earlier, view.pageToken] });
  });
  return [previous, next];
}

/** The view's page number: 1 + the pages before it. */
export function pageNumber(view) {
  return earlierTokens(view).length + 1;
}

/** "Page 2: 3 tuning jobs": the page's number and how many rows it shows. */
export function pageStatus(view, count, noun) {
  return `Page ${pageNumber(view)}: ${count} ${noun}${count === 1 ? "" : "s"}`;
}
