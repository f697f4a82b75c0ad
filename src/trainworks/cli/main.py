"""Entry point of the `trainworks` command."""

from __future__ import annotations

import typer

from trainworks.cli.serve import serve

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Trainworks: Vertex AI compatible training jobs."
)
app.command("serve")(serve)


@app.callback()
def root() -> None:
    """Trainworks: Vertex AI compatible training jobs on machines you control."""


def _register() -> None:
    try:
        from trainworks.cli.custom_jobs import app as custom_jobs_app
    except ImportError:  # the group is optional while it is being built
        return
    app.add_typer(custom_jobs_app, name="custom-jobs")


_register()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
