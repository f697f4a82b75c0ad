// Training pipelines: the list, and a pipeline's task, model and error; cancel and delete.

import { cliScope, parent } from "../api.js";
import { age, badge, clear, emptyState, facts, h, isTerminal, json, runTime, statusError, when } from "../ui.js";
import { cancelButton, deleteButton, detailPage, idLink, nameColumn, pagedList } from "./list.js";

const PIPELINES = {
  section: "pipelines", title: "Training pipelines", noun: "Training pipeline", api: "v1", collection: "trainingPipelines",
  filterable: true,
  states: [
    "PIPELINE_STATE_QUEUED", "PIPELINE_STATE_PENDING", "PIPELINE_STATE_RUNNING", "PIPELINE_STATE_SUCCEEDED",
    "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLING", "PIPELINE_STATE_CANCELLED", "PIPELINE_STATE_PAUSED",
  ],
};

const taskName = (p) => String(p.trainingTaskDefinition || "").split("/").pop().replace(/\.yaml$/, "");

export function renderList(main, _params, ctx) {
  return pagedList(main, ctx, PIPELINES, {
    empty: emptyState("training pipelines", `trainworks training-pipelines create ${cliScope()} --display-name my-pipeline --config pipeline.yaml`),
    columns: [
      nameColumn(PIPELINES),
      { label: "State", cell: (p) => badge(p.state) },
      { label: "Task", cell: taskName },
      { label: "Age", cell: (p) => age(p.createTime) },
      { label: "Duration", cell: (p) => runTime(p.startTime, p.endTime) },
    ],
  });
}

export function renderDetail(main, [pipelineId], ctx) {
  return detailPage(main, ctx, PIPELINES, pipelineId, {
    id: "pipeline-page",
    render: (p, { title, actions, body, path, reload }) => {
      clear(title, p.displayName || pipelineId, " ", badge(p.state));
      clear(actions,
        // Cancel while it runs; delete once it has ended (the API refuses deleting a running one).
        isTerminal(p.state) || p.state === "PIPELINE_STATE_CANCELLING"
          ? null : cancelButton("Cancel pipeline", `Cancel training pipeline ${pipelineId}?`, path, reload),
        isTerminal(p.state) ? deleteButton("Delete pipeline", `Delete training pipeline ${pipelineId}?`, path, "#/pipelines") : null);
      const model = p.modelToUpload?.name || (p.modelId ? `${parent()}/models/${p.modelId}` : "");
      clear(body,
        statusError(p.error),
        facts([
          ["Name", h("span.mono", {}, p.name)],
          ["Task", taskName(p)],
          ["Created", when(p.createTime)],
          ["Duration", runTime(p.startTime, p.endTime)],
          ["Model", model ? idLink("models", model) : ""],
        ]),
        h("details", {}, h("summary", {}, "Pipeline"), json(p)),
      );
    },
  });
}
