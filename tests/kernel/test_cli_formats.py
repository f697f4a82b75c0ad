"""gcloud's --format and --sort-by as the kernel reads them (pure: no server), and help that is never cut."""

from __future__ import annotations

from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from trainworks.cli.main import app
from trainworks.kernel.render import FormatError, format_records, parse_format, parse_sort_by, sort_records

RECORDS: list[dict[str, Any]] = [
    {
        "name": "projects/12/locations/us-central1/customJobs/5",
        "displayName": "b",
        "state": "JOB_STATE_RUNNING",
        "createTime": "2026-01-02T00:00:00Z",
        "labels": {"team": "ml"},
        "jobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}}]},
    },
    {
        "name": "projects/12/locations/us-central1/customJobs/6",
        "displayName": "a, z",
        "state": "JOB_STATE_FAILED",
        "createTime": "2026-01-01T00:00:00Z",
    },
]


def test_value_is_tab_separated_without_a_header() -> None:
    out = format_records(RECORDS, parse_format("value(name.basename(),state)"))
    assert out == "5\tJOB_STATE_RUNNING\n6\tJOB_STATE_FAILED\n"
    assert format_records(RECORDS, parse_format("value[separator=','](name.basename(),state)")) == (
        "5,JOB_STATE_RUNNING\n6,JOB_STATE_FAILED\n"
    )


def test_table_heads_columns_in_upper_snake_case_and_aligns_them() -> None:
    fmt = parse_format(
        "table(name.basename():label=ID, createTime, jobSpec.workerPoolSpecs[0].machineSpec.machineType)"
    )
    assert format_records(RECORDS, fmt).splitlines() == [
        "ID  CREATE_TIME           MACHINE_TYPE",
        "5   2026-01-02T00:00:00Z  n1-standard-4",
        "6   2026-01-01T00:00:00Z",
    ]
    assert format_records(RECORDS, parse_format("table[no-heading](state)")) == (
        "JOB_STATE_RUNNING\nJOB_STATE_FAILED\n"
    )


def test_csv_has_a_header_of_the_keys_and_quotes_as_csv_does() -> None:
    out = format_records(RECORDS, parse_format("csv(name.basename(),displayName,labels)"))
    assert out.splitlines() == ["name,displayName,labels", "5,b,team=ml", '6,"a, z",']
    out = format_records(RECORDS, parse_format("csv[no-heading,separator=';'](displayName,state)"))
    assert out.splitlines() == ["b;JOB_STATE_RUNNING", "a, z;JOB_STATE_FAILED"]


def test_snake_case_keys_find_camel_case_fields() -> None:
    assert format_records(RECORDS[:1], parse_format("value(display_name,create_time)")) == (
        "b\t2026-01-02T00:00:00Z\n"
    )


def test_json_and_yaml_take_keys_and_names_are_case_insensitive() -> None:
    assert parse_format("JSON").name == "json"
    assert parse_format("default").name == "human"
    assert [key.text for key in parse_format("json(name,state)").keys] == ["name", "state"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("value()", "value() needs the keys"),
        ("xml(name)", "unknown format [xml]"),
        ("table(a..b)", "bad resource key [a..b]"),
        ("human(name)", "takes no keys"),
    ],
)
def test_bad_formats_say_why(text: str, message: str) -> None:
    with pytest.raises(
        FormatError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
    ):
        parse_format(text)


def test_sort_by_keys_tilde_descending_and_several_keys() -> None:
    names = [r["displayName"] for r in sort_records(RECORDS, parse_sort_by(["displayName"]))]
    assert names == ["a, z", "b"]
    names = [r["displayName"] for r in sort_records(RECORDS, parse_sort_by(["~display_name"]))]
    assert names == ["b", "a, z"]
    names = [r["displayName"] for r in sort_records(RECORDS, parse_sort_by(["createTime desc"]))]
    assert names == ["b", "a, z"]
    # Numbers (int64 strings on the wire) sort as numbers; the second key breaks ties.
    rows = [{"n": "10", "k": "b"}, {"n": "9", "k": "a"}, {"n": "10", "k": "a"}]
    assert sort_records(rows, parse_sort_by(["n,~k"])) == [rows[1], rows[0], rows[2]]
    with pytest.raises(FormatError):
        parse_sort_by(["a b c"])


def _commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command's path under `group` (a group lists and loads its commands: the top level's load when
    named)."""
    if hasattr(group, "list_commands"):
        ctx = typer.Context(group)
        names = group.list_commands(ctx)
        return [p for name in names for p in _commands(group.get_command(ctx, name), (*path, name))]
    return [path]


def test_help_is_wrapped_never_cut_at_80_columns() -> None:
    root = typer.main.get_command(app)
    commands = _commands(root)
    assert ("custom-jobs", "create") in commands
    runner = CliRunner()
    for path in [(), *{p[:1] for p in commands}, *commands]:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
        assert result.exit_code == 0, (path, result.output)
        assert "…" not in result.output, (path, result.output)
    create = runner.invoke(app, ["custom-jobs", "create", "--help"], env={"COLUMNS": "80"}).output
    assert "TRAINWORKS_STAGING_BUCKET" in create
    assert max(len(line) for line in create.splitlines()) <= 80


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.startswith("trainworks ")
