// Models: the registry's list, and a model's versions with their aliases.

import { del, get, idOf, parent } from "../api.js";
import { actionButton, age, clear, facts, h, json, table, when } from "../ui.js";
import { detailPage, pagedList } from "./list.js";

const aliases = (m) => (m.versionAliases || []).join(", ") || "—";

export function renderList(main, _params, ctx) {
  return pagedList(main, ctx, {
    id: "models-page",
    title: "Models",
    path: `/v1/${parent()}/models`,
    field: "models",
    open: (m) => `#/models/${idOf(m.name)}`,
    empty: "No models.",
    every: 5000,
    columns: [
      { label: "Name", cell: (m) => h("a", { href: `#/models/${idOf(m.name)}` }, m.displayName || idOf(m.name)) },
      { label: "Default version", cell: (m) => m.versionId || "—", className: "num" },
      { label: "Aliases", cell: aliases },
      { label: "Age", cell: (m) => age(m.createTime) },
    ],
  });
}

export function renderDetail(main, [modelId], ctx) {
  const path = `/v1/${parent()}/models/${encodeURIComponent(modelId)}`;
  return detailPage(main, ctx, {
    id: "model-page",
    back: "#/models",
    backLabel: "Models",
    every: 5000,
    fetch: async () => {
      const [model, versions] = await Promise.all([get(path), get(`${path}:listVersions`)]);
      return { model, versions: versions.models || [] };
    },
    render: ({ model, versions }, { title, actions, body }) => {
      clear(title, model.displayName || modelId);
      clear(actions, actionButton("Delete model", `Delete model ${modelId} and all its versions?`, async () => {
        await del(path);
        location.hash = "#/models";
      }));
      const t = table("Versions", [
        { label: "Version", cell: (v) => v.versionId, className: "num" },
        { label: "Aliases", cell: aliases },
        { label: "Created", cell: (v) => when(v.versionCreateTime || v.createTime) },
        { label: "Artifacts", cell: (v) => v.artifactUri || "—", className: "mono" },
        { label: "Pipeline", cell: (v) => (v.trainingPipeline ? h("a", { href: `#/pipelines/${idOf(v.trainingPipeline)}` }, idOf(v.trainingPipeline)) : "—") },
      ], versions, { empty: "No versions." });
      t.id = "versions-table";
      clear(body,
        facts([["Name", h("span.mono", {}, model.name)], ["Default version", model.versionId], ["Created", when(model.createTime)], ["Description", model.description || ""]]),
        h("h2", {}, "Versions"),
        t,
        h("details", {}, h("summary", {}, "Model"), json(model)),
      );
    },
  });
}
