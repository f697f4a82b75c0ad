// Training clusters (v1beta1 modelDevelopmentClusters): the list, and a cluster's nodes, Slurm partitions
// and events.

import { cliScope } from "../api.js";
import { age, badge, clear, emptyState, facts, h, json, statusError, table, when } from "../ui.js";
import { deleteButton, detailPage, nameColumn, pagedList } from "./list.js";

const CLUSTERS = { section: "clusters", title: "Training clusters", noun: "Training cluster", api: "v1beta1", collection: "modelDevelopmentClusters" };

export function renderList(main, _params, ctx) {
  return pagedList(main, ctx, CLUSTERS, {
    empty: emptyState("training clusters", `trainworks clusters create c1 --config cluster.yaml ${cliScope()}`),
    columns: [
      nameColumn(CLUSTERS),
      { label: "State", cell: (c) => badge(c.clusterStatus?.state) },
      { label: "Nodes", cell: (c) => String((c.clusterStatus?.nodesStatus || []).length), className: "num" },
      { label: "Node pools", cell: (c) => (c.nodePools || []).map((p) => p.id).join(", ") },
      { label: "Age", cell: (c) => age(c.createTime) },
    ],
  });
}

export function renderDetail(main, [clusterId], ctx) {
  return detailPage(main, ctx, CLUSTERS, clusterId, {
    id: "cluster-page",
    render: (c, { title, actions, body, path }) => {
      const status = c.clusterStatus || {};
      const slurm = c.orchestratorSpec?.slurmSpec || {};
      clear(title, c.displayName || clusterId, " ", badge(status.state));
      clear(actions, deleteButton("Delete cluster", `Delete training cluster ${clusterId} and its nodes?`, path, "#/clusters"));
      const events = [...(c.clusterEvents || [])].sort((a, b) => String(b.eventTime).localeCompare(String(a.eventTime)));
      clear(body,
        statusError(status.error),
        facts([
          ["Name", h("span.mono", {}, c.name)],
          ["Detail", status.detail || ""],
          ["Created", when(c.createTime)],
          ["Login pool", slurm.loginNodePoolId || ""],
          ["Default partition", slurm.defaultPartitionId || ""],
        ]),
        h("h2", {}, "Nodes"),
        table("Nodes", [
          { label: "Instance", cell: (n) => n.instanceName || n.instanceId || "—", className: "mono" },
          { label: "Pool", cell: (n) => n.nodePoolId || "—" },
          { label: "Type", cell: (n) => (n.nodePoolType || "").replace("NODE_POOL_TYPE_", "").toLowerCase() || "—" },
          { label: "State", cell: (n) => badge(n.nodeState) },
          { label: "Detail", cell: (n) => n.detail || "" },
        ], status.nodesStatus || [], { empty: "No nodes yet." }),
        h("h2", {}, "Partitions"),
        table("Slurm partitions", [
          { label: "Partition", cell: (p) => p.id + (p.id === slurm.defaultPartitionId ? " (default)" : ""), className: "mono" },
          { label: "Node pools", cell: (p) => (p.nodePoolIds || []).join(", ") },
        ], slurm.partitions || [], { empty: "No partitions." }),
        h("h2", {}, "Events"),
        table("Cluster events, newest first", [
          { label: "Time", cell: (e) => when(e.eventTime) },
          { label: "Type", cell: (e) => (e.eventType || "").replace("EVENT_TYPE_", "").toLowerCase() },
          { label: "Message", cell: (e) => e.eventMessage || "" },
        ], events, { empty: "No events." }),
        h("details", {}, h("summary", {}, "Cluster spec"), json(c)),
      );
    },
  });
}
