// Models: the registry's list, and a model's versions with their aliases.

import { cliScope, get } from "../api.js";
import { age, clear, emptyState, facts, h, json, table, when } from "../ui.js";
import { deleteButton, detailPage, idLink, nameColumn, pagedList } from "./list.js";

// Models have no state: the list filters on the name, labels and create time.
const MODELS = { section: "models", title: "Models", noun: "Model", api: "v1", collection: "models", filterable: true };

const aliases = (m) => (m.versionAliases || []).join(", ") || "—";

export function renderList(main, _params, ctx) {
  return pagedList(main, ctx, MODELS, {
    empty: emptyState("models", `trainworks models upload ${cliScope()} --display-name my-model --artifact-uri gs://BUCKET/model/`),
    every: 5000,
    columns: [
      nameColumn(MODELS),
      { label: "Default version", cell: (m) => m.versionId || "—", className: "num" },
      { label: "Aliases", cell: aliases },
      { label: "Age", cell: (m) => age(m.createTime) },
    ],
  });
}

export function renderDetail(main, [modelId], ctx) {
  return detailPage(main, ctx, MODELS, modelId, {
    id: "model-page",
    every: 5000,
    fetch: async (path) => {
      const [model, versions] = await Promise.all([get(path), get(`${path}:listVersions`)]);
      return { model, versions: versions.models || [] };
    },
    render: ({ model, versions }, { title, actions, body, path }) => {
      clear(title, model.displayName || modelId);
      clear(actions, deleteButton("Delete model", `Delete model ${modelId} and all its versions?`, path, "#/models"));
      const t = table("Versions", [
        { label: "Version", cell: (v) => v.versionId, className: "num" },
        { label: "Aliases", cell: aliases },
        { label: "Created", cell: (v) => when(v.versionCreateTime || v.createTime) },
        { label: "Artifacts", cell: (v) => v.artifactUri || "—", className: "mono" },
        { label: "Pipeline", cell: (v) => (v.trainingPipeline ? idLink("pipelines", v.trainingPipeline) : "—") },
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
