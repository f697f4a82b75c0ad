// What the pages of the resource kinds share (tuning jobs, persistent resources, clusters, pipelines, models):
// a paged list refreshed live, a detail page re-rendered only when its resource changes, and their links and
// buttons. The custom jobs pages keep their own: the default page loads no module it can do without.
//
// A kind is a plain object { section, title, noun, api, collection, filterable, states }: `#/<section>` lists
// the REST collection `/<api>/<parent>/<collection>` (the list response names its field after the
// collection) under the heading `title`, and `#/<section>/<id>` shows one resource (`noun`, capitalised,
// names one in messages). `filterable`: the list takes an AIP-160 filter; `states`: those it can filter on.

import { del, get, idOf, parent, post, query } from "../api.js";
import { filterForm, filterText, isFiltered, listDefaults, pageNumber, pageStatus, pagerButtons, viewOf } from "../listview.js";
import { actionButton, clear, h, isNotFound, notFound, table } from "../ui.js";

/** The kind's collection under the chosen scope (read at each call: the scope can change). */
function collectionPath({ api, collection }) {
  return `/${api}/${parent()}/${collection}`;
}

/** The hash of a resource's page: #/<section>/<its ID>. */
export function pageOf(section, name) {
  return `#/${section}/${idOf(name)}`;
}

/** A link to a resource's page, by its ID. */
export function idLink(section, name) {
  return h("a", { href: pageOf(section, name) }, idOf(name));
}

/** A list's Name column: the display name (else the ID), linking to the resource's page. */
export function nameColumn({ section }) {
  return { label: "Name", cell: (r) => h("a", { href: pageOf(section, r.name) }, r.displayName || idOf(r.name)) };
}

/**
 * Renders the kind's heading, filter form and a table of one page of its collection, with previous/next,
 * into `main`. The filters and page are the URL's (listview.js): the state (when kind.states lists them), a
 * name and a filter expression (when kind.filterable: its API takes an AIP-160 filter), the page size and
 * page token.
 * columns: as ui.table, but each cell is called as cell(row, now), `now` being one clock reading a refresh.
 * fill(rows, holder): called after each render, for cells that need more than the list response gives.
 */
export async function pagedList(main, ctx, kind, {
  columns, empty, every = 3000, id = `${kind.section}-page`, titleId = `${id}-title`, tableId = `${id}-table`,
  caption = kind.title, fill = null,
}) {
  const defaults = listDefaults(kind);
  const view = viewOf(ctx.query, defaults);
  const section = h("section", { id, "aria-labelledby": titleId });
  const form = filterForm(kind.section, view, defaults, { label: `Filter ${kind.title.toLowerCase()}`, states: kind.states });
  const status = h("p.muted", { role: "status", "aria-live": "polite" });
  const holder = h("div.table-holder");
  const pager = h("nav.pager", { "aria-label": "Pages" });
  clear(main, section);
  section.append(h("h1", { id: titleId }, kind.title), form, status, holder, pager);
  const filter = filterText(view);
  const noMatch = isFiltered(view) || view.pageToken ? `No ${kind.title.toLowerCase()} match.` : null;

  async function load() {
    const page = await get(`${collectionPath(kind)}${query({ pageSize: view.pageSize, pageToken: view.pageToken, filter })}`);
    if (!ctx.active) return;
    const rows = page[kind.collection] || [];
    const now = Date.now();
    const cells = columns.map((column) => ({ ...column, cell: (row) => column.cell(row, now) }));
    const t = table(caption, cells, rows, {
      rowKey: (r) => r.name, onOpen: (r) => (location.hash = pageOf(kind.section, r.name)), empty: noMatch || empty,
    });
    t.id = tableId;
    clear(holder, t);
    status.textContent = pageStatus(view, rows.length, kind.noun.toLowerCase());
    section.dataset.page = String(pageNumber(view));
    clear(pager, ...pagerButtons(kind.section, view, defaults, page.nextPageToken || ""));
    section.dataset.ready = "true";
    if (fill) await fill(rows, holder);
  }
  await ctx.live(load, every);
}

/**
 * One resource's page: a link back to the list, the title, actions and body, re-rendered only when what
 * fetch(path) returns changes (so that focus and scrolling survive the polling). render(data, parts) fills
 * parts.title, parts.actions and parts.body; parts.path is the resource's REST path, parts.reload refreshes.
 * heading: the title's text until the first render.
 */
export async function detailPage(main, ctx, kind, resourceId, {
  id, render, every = 3000, titleId = `${id}-title`, heading, backLabel = kind.title, fetch = (path) => get(path),
}) {
  const path = `${collectionPath(kind)}/${encodeURIComponent(resourceId)}`;
  const section = h("section", { id, "aria-labelledby": titleId });
  const title = h("h1", { id: titleId }, heading);
  const actions = h("div.actions");
  const body = h("div");
  clear(main, section);
  section.append(h("p", {}, h("a", { href: `#/${kind.section}` }, `← ${backLabel}`)), title, actions, body);
  let rendered = "";
  async function load() {
    let data;
    try {
      data = await fetch(path);
    } catch (error) {
      if (!isNotFound(error) || !ctx.active) throw error;
      // An unknown ID, or a resource deleted meanwhile: say so and stop polling.
      ctx.close();
      notFound(main, kind.noun, resourceId, `#/${kind.section}`, kind.title);
      return;
    }
    if (!ctx.active) return;
    const key = JSON.stringify(data);
    if (key !== rendered) {
      rendered = key;
      render(data, { title, actions, body, path, reload: load });
    }
    section.dataset.ready = "true";
  }
  await ctx.live(load, every);
}

/** Deletes the resource at `path` once confirmed, then goes `back` (its list). */
export function deleteButton(label, question, path, back) {
  return actionButton(label, question, async () => {
    await del(path);
    location.hash = back;
  });
}

/** Cancels the resource at `path` once confirmed (the dialog's button says `label` too), then reloads. */
export function cancelButton(label, question, path, reload) {
  return actionButton(label, question, async () => {
    await post(`${path}:cancel`);
    await reload();
  }, { confirmLabel: label });
}
