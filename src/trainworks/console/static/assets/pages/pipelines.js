// Training pipelines: the list, and a pipeline's task, model and error; cancel and delete.

import { del, get, idOf, parent, post } from "../api.js";
import { actionButton, age, badge, clear, facts, h, isTerminal, json, runTime, statusError, when } from "../ui.js";
import { detailPage, pagedList } from "./list.js";

const taskName = (p) => String(p.trainingTaskDefinition || "").split("/").pop().replace(/\.yaml$/, "");

export function renderList(main, _params, ctx) {
  return pagedList(main, ctx, {
    id: "pipelines-page",
    title: "Training pipelines",
    path: `/v1/${parent()}/trainingPipelines`,
    field: "trainingPipelines",
    open: (p) => `#/pipelines/${idOf(p.name)}`,
    empty: "No training pipelines.",
    columns: [
      { label: "Name", cell: (p) => h("a", { href: `#/pipelines/${idOf(p.name)}` }, p.displayName || idOf(p.name)) },
      { label: "State", cell: (p) => badge(p.state) },
      { label: "Task", cell: taskName },
      { label: "Age", cell: (p) => age(p.createTime) },
      { label: "Duration", cell: (p) => runTime(p.startTime, p.endTime) },
    ],
  });
}

export function renderDetail(main, [pipelineId], ctx) {
  const path = `/v1/${parent()}/trainingPipelines/${encodeURIComponent(pipelineId)}`;
  return detailPage(main, ctx, {
    id: "pipeline-page",
    back: "#/pipelines",
    backLabel: "Training pipelines",
    fetch: () => get(path),
    render: (p, { title, actions, body, reload }) => {
      clear(title, p.displayName || pipelineId, " ", badge(p.state));
      const buttons = [];
      if (!isTerminal(p.state)) {
        buttons.push(actionButton("Cancel pipeline", `Cancel training pipeline ${pipelineId}?`, async () => {
          await post(`${path}:cancel`);
          await reload();
        }, { confirmLabel: "Cancel pipeline" }));
      }
      buttons.push(actionButton("Delete pipeline", `Delete training pipeline ${pipelineId}?`, async () => {
        await del(path);
        location.hash = "#/pipelines";
      }));
      clear(actions, buttons);
      const model = p.modelToUpload?.name || (p.modelId ? `${parent()}/models/${p.modelId}` : "");
      clear(body,
        statusError(p.error),
        facts([
          ["Name", h("span.mono", {}, p.name)],
          ["Task", taskName(p)],
          ["Created", when(p.createTime)],
          ["Duration", runTime(p.startTime, p.endTime)],
          ["Model", model ? h("a", { href: `#/models/${idOf(model)}` }, idOf(model)) : ""],
        ]),
        h("details", {}, h("summary", {}, "Pipeline"), json(p)),
      );
    },
  });
}
