// Costs: the costs extension's report by job or by persistent resource, with an optional filter.

import { get, idOf, parent, query } from "../api.js";
import { badge, clear, facts, h, hours, table, usd } from "../ui.js";

const view = { by: "job", filter: "" };

export async function render(main, _params, ctx) {
  const section = h("section", { id: "costs-page", "aria-labelledby": "costs-title" });
  const by = h("select", { id: "costs-by", name: "by" },
    h("option", { value: "job", selected: view.by === "job" }, "Custom job"),
    h("option", { value: "resource", selected: view.by === "resource" }, "Persistent resource"));
  const filter = h("input", { id: "costs-filter", name: "filter", type: "text", size: "40", value: view.filter, placeholder: 'state=JOB_STATE_SUCCEEDED' });
  const form = h("form.filters", { role: "search", "aria-label": "Costs report" },
    h("label", {}, "By ", by), h("label", {}, "Filter ", filter), h("button", { type: "submit" }, "Apply"));
  const summary = h("div");
  const holder = h("div.table-holder");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    view.by = by.value;
    view.filter = filter.value;
    load();
  });
  by.addEventListener("change", () => form.requestSubmit());
  clear(main, section);
  section.append(h("h1", { id: "costs-title" }, "Costs"), form, summary, holder);

  async function load() {
    const report = await get(`/trainworks/v1/${parent()}/costs${query({ by: view.by, filter: view.filter })}`);
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
    const link = (r) => (r.kind === "persistentResource" ? `#/resources/${idOf(r.name)}` : `#/jobs/${idOf(r.name)}`);
    const t = table(`Costs by ${view.by}`, [
      { label: "Name", cell: (r) => h("a", { href: link(r) }, r.displayName || idOf(r.name)) },
      { label: "State", cell: (r) => badge(r.state) },
      { label: "Spot", cell: (r) => (r.spot ? "yes" : "no") },
      { label: "Machine-hours", cell: (r) => hours(r.machineHours), className: "num" },
      { label: "Cost", cell: (r) => usd(r.costUsd), className: "num" },
      { label: "On-demand equivalent", cell: (r) => usd(r.onDemandEquivalentUsd), className: "num" },
      { label: "Covered by resource", cell: (r) => (r.coveredUsd ? usd(r.coveredUsd) : "—"), className: "num" },
    ], report.rows || [], { rowKey: (r) => r.name, onOpen: (r) => (location.hash = link(r)), empty: "Nothing billed." });
    t.id = "costs-table";
    clear(holder, t);
    section.dataset.ready = "true";
  }
  await ctx.live(load, 5000);
}
