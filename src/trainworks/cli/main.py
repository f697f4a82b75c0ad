"""Entry point of the `trainworks` command."""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from trainworks.kernel.cli import TYPER_SETTINGS

# Every command of `trainworks`, in the order its help lists them: (name, module, attribute), a command
# group (a Typer app) or one command (a function). Each is imported when it is named on the command line, or
# listed by this help: a command starts with its own kind's modules only, not every kind's (~0.15 s).
COMMANDS = (
    ("serve", "trainworks.cli.serve", "serve"),
    ("costs", "trainworks.costs.cli", "costs"),
    ("submit", "trainworks.cli.submit", "submit"),
    ("tensorboard", "trainworks.kinds.custom_jobs.tensorboard_cli", "tensorboard"),
    ("custom-jobs", "trainworks.kinds.custom_jobs.cli", "app"),
    ("hp-tuning-jobs", "trainworks.kinds.tuning_jobs.cli", "app"),
    ("models", "trainworks.kinds.models.cli", "app"),
    ("persistent-resources", "trainworks.kinds.persistent_resources.cli", "app"),
    ("clusters", "trainworks.kinds.clusters.cli", "app"),
    ("datasets", "trainworks.kinds.datasets.cli", "app"),
    ("admin", "trainworks.cli.admin", "app"),
    ("training-pipelines", "trainworks.kinds.training_pipelines.cli", "app"),
)
_WHERE = {name: (module, attribute) for name, module, attribute in COMMANDS}
# Commands of one module mounted in another's group when that group loads: (group, name, module, attribute).
MOUNTED = (("admin", "preempt", "trainworks.kinds.custom_jobs.cli", "preempt"),)


class LazyCommands(TyperGroup):
    """The top-level group: its commands are loaded by name (`COMMANDS`)."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [name for name, _module, _attribute in COMMANDS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = self.commands.get(cmd_name)
        if found is None and cmd_name in _WHERE:
            module, attribute = _WHERE[cmd_name]
            target = getattr(importlib.import_module(module), attribute)
            if isinstance(target, typer.Typer):
                mounted = {command.name for command in target.registered_commands}
                for group, name, source, function in MOUNTED:
                    if group == cmd_name and name not in mounted:  # once per process, however many runs
                        target.command(name)(getattr(importlib.import_module(source), function))
                found = typer.main.get_group(target)
            else:
                single = typer.Typer(**TYPER_SETTINGS)
                single.command(cmd_name)(target)
                found = typer.main.get_command(single)
            found.name = cmd_name
            self.add_command(found, cmd_name)
        return found


app = typer.Typer(cls=LazyCommands, help="Trainworks: Vertex AI compatible training jobs.", **TYPER_SETTINGS)


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
