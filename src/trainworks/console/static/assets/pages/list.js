// A paged resource list (pageSize/pageToken, previous/next) refreshed live: what the simpler pages share.

import { get, query } from "../api.js";
import { clear, h, table } from "../ui.js";

/**
 * Renders `title` and a table of `path`'s `field` (e.g. "persistentResources") into `main`.
 * columns: as ui.table; open(row) -> hash of the row's page.
 */
export async function pagedList(main, ctx, { id, title, path, field, columns, open, empty, every = 3000 }) {
  const section = h("section", { id, "aria-labelledby": `${id}-title` });
  const holder = h("div.table-holder");
  const pager = h("nav.pager", { "aria-label": "Pages" });
  const tokens = [""];
  clear(main, section);
  section.append(h("h1", { id: `${id}-title` }, title), holder, pager);

  async function load() {
    const page = await get(`${path}${query({ pageSize: 50, pageToken: tokens[tokens.length - 1] })}`);
    if (!ctx.active) return;
    const rows = page[field] || [];
    const t = table(title, columns, rows, { rowKey: (r) => r.name, onOpen: (r) => (location.hash = open(r)), empty });
    t.id = `${id}-table`;
    clear(holder, t);
    const previous = h("button", { type: "button", disabled: tokens.length === 1 }, "Previous page");
    previous.addEventListener("click", () => { tokens.pop(); load(); });
    const next = h("button", { type: "button", disabled: !page.nextPageToken }, "Next page");
    next.addEventListener("click", () => { tokens.push(page.nextPageToken); load(); });
    clear(pager, previous, next);
    section.dataset.ready = "true";
  }
  await ctx.live(load, every);
}

/** A detail page's frame: back link, title, actions and body, re-rendered only when the resource changes. */
export async function detailPage(main, ctx, { id, back, backLabel, fetch, render, every = 3000 }) {
  const section = h("section", { id, "aria-labelledby": `${id}-title` });
  const title = h("h1", { id: `${id}-title` });
  const actions = h("div.actions");
  const body = h("div");
  clear(main, section);
  section.append(h("p", {}, h("a", { href: back }, `← ${backLabel}`)), title, actions, body);
  let rendered = "";
  async function load() {
    const data = await fetch();
    if (!ctx.active) return;
    const key = JSON.stringify(data);
    if (key !== rendered) {
      rendered = key;
      render(data, { title, actions, body, reload: load });
    }
    section.dataset.ready = "true";
  }
  await ctx.live(load, every);
}
