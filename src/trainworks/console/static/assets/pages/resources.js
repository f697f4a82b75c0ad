// Persistent resources: the list and one resource's pools, state and error; delete with a confirm.

import { del, get, idOf, parent } from "../api.js";
import { actionButton, age, badge, clear, facts, h, json, statusError, table, when } from "../ui.js";
import { detailPage, pagedList } from "./list.js";

function pools(r) {
  return (r.resourcePools || [])
    .map((p) => `${p.id}: ${p.usedReplicaCount ?? 0}/${p.replicaCount} × ${p.machineSpec?.machineType || "?"}`)
    .join("; ");
}

export function renderList(main, _params, ctx) {
  return pagedList(main, ctx, {
    id: "resources-page",
    title: "Persistent resources",
    path: `/v1/${parent()}/persistentResources`,
    field: "persistentResources",
    open: (r) => `#/resources/${idOf(r.name)}`,
    empty: "No persistent resources.",
    columns: [
      { label: "Name", cell: (r) => h("a", { href: `#/resources/${idOf(r.name)}` }, r.displayName || idOf(r.name)) },
      { label: "State", cell: (r) => badge(r.state) },
      { label: "Pools (used/replicas)", cell: pools },
      { label: "Age", cell: (r) => age(r.createTime) },
    ],
  });
}

export function renderDetail(main, [resourceId], ctx) {
  const path = `/v1/${parent()}/persistentResources/${encodeURIComponent(resourceId)}`;
  return detailPage(main, ctx, {
    id: "resource-page",
    back: "#/resources",
    backLabel: "Persistent resources",
    fetch: () => get(path),
    render: (r, { title, actions, body }) => {
      clear(title, r.displayName || resourceId, " ", badge(r.state));
      clear(actions, actionButton("Delete resource", `Delete persistent resource ${resourceId}? Jobs on it fail.`, async () => {
        await del(path);
        location.hash = "#/resources";
      }));
      clear(body,
        statusError(r.error),
        facts([["Name", h("span.mono", {}, r.name)], ["Created", when(r.createTime)], ["Started", r.startTime ? when(r.startTime) : ""]]),
        h("h2", {}, "Resource pools"),
        table("Resource pools", [
          { label: "Pool", cell: (p) => p.id, className: "mono" },
          { label: "Machine", cell: (p) => p.machineSpec?.machineType || "—" },
          { label: "Accelerators", cell: (p) => (p.machineSpec?.acceleratorType ? `${p.machineSpec.acceleratorCount} × ${p.machineSpec.acceleratorType}` : "—") },
          { label: "Replicas", cell: (p) => String(p.replicaCount ?? "—"), className: "num" },
          { label: "In use", cell: (p) => String(p.usedReplicaCount ?? 0), className: "num" },
        ], r.resourcePools || []),
        h("details", {}, h("summary", {}, "Resource"), json(r)),
      );
    },
  });
}
