// Persistent resources: the list and one resource's pools, state and error; delete with a confirm.

import { cliScope } from "../api.js";
import { age, badge, clear, emptyState, facts, h, json, statusError, table, when } from "../ui.js";
import { deleteButton, detailPage, nameColumn, pagedList } from "./list.js";

const RESOURCES = { section: "resources", title: "Persistent resources", noun: "Persistent resource", api: "v1", collection: "persistentResources" };

function pools(r) {
  return (r.resourcePools || [])
    .map((p) => `${p.id}: ${p.usedReplicaCount ?? 0}/${p.replicaCount} × ${p.machineSpec?.machineType || "?"}`)
    .join("; ");
}

export function renderList(main, _params, ctx) {
  return pagedList(main, ctx, RESOURCES, {
    empty: emptyState("persistent resources", `trainworks persistent-resources create ${cliScope()} --persistent-resource-id warm-1 \\
    --resource-pool-spec=replica-count=1,machine-type=n1-standard-4`),
    columns: [
      nameColumn(RESOURCES),
      { label: "State", cell: (r) => badge(r.state) },
      { label: "Pools (used/replicas)", cell: pools },
      { label: "Age", cell: (r) => age(r.createTime) },
    ],
  });
}

export function renderDetail(main, [resourceId], ctx) {
  return detailPage(main, ctx, RESOURCES, resourceId, {
    id: "resource-page",
    render: (r, { title, actions, body, path }) => {
      clear(title, r.displayName || resourceId, " ", badge(r.state));
      clear(actions, deleteButton("Delete resource", `Delete persistent resource ${resourceId}? Jobs on it fail.`, path, "#/resources"));
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
