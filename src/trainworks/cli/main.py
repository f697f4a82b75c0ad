"""Entry point of the `trainworks` command."""

from __future__ import annotations

from typing import Annotated

import typer

from trainworks.cli.admin import app as admin_app
from trainworks.cli.serve import serve
from trainworks.cli.submit import submit
from trainworks.costs.cli import costs
from trainworks.kernel.cli import TYPER_SETTINGS
from trainworks.kinds.clusters.cli import app as clusters_app
from trainworks.kinds.custom_jobs.cli import app as custom_jobs_app
from trainworks.kinds.custom_jobs.cli import preempt
from trainworks.kinds.custom_jobs.tensorboard_cli import tensorboard
from trainworks.kinds.datasets.cli import app as datasets_app
from trainworks.kinds.models.cli import app as models_app
from trainworks.kinds.persistent_resources.cli import app as persistent_resources_app
from trainworks.kinds.training_pipelines.cli import app as training_pipelines_app
from trainworks.kinds.tuning_jobs.cli import app as hp_tuning_jobs_app

app = typer.Typer(help="Trainworks: Vertex AI compatible training jobs.", **TYPER_SETTINGS)
app.command("serve")(serve)
app.add_typer(custom_jobs_app, name="custom-jobs")
app.add_typer(hp_tuning_jobs_app, name="hp-tuning-jobs")
app.add_typer(models_app, name="models")
app.add_typer(persistent_resources_app, name="persistent-resources")
app.add_typer(clusters_app, name="clusters")
app.add_typer(datasets_app, name="datasets")
admin_app.command("preempt")(preempt)
app.add_typer(admin_app, name="admin")
app.add_typer(training_pipelines_app, name="training-pipelines")
app.command("costs")(costs)
app.command("submit")(submit)
app.command("tensorboard")(tensorboard)


def version_text() -> str:
    """`trainworks <version>`: the installed distribution's version."""
    from importlib import metadata  # only here: ~30 ms of every command's start

    try:
        return f"trainworks {metadata.version('trainworks')}"
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "trainworks (version unknown: not installed)"


def _show_version(value: bool) -> None:
    if value:
        print(version_text())
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Trainworks: Vertex AI compatible training jobs on machines you control."""


def main() -> None:
    app()


if __name__ == "__main__":
    main()
