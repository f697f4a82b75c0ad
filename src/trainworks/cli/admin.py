"""`trainworks admin`: operator tools: chaos preemption of SPOT jobs (through the REST API; the command is
the custom jobs' own, added here by `cli.main`), API tokens, and a local CA for TLS (`admin tls init`).

Tokens are managed on the server's own database (`--home` / `--database-url`, as `serve` takes them), not
through the API: whoever can read the server's state may make tokens, and no API call can mint one. The
server looks tokens up on every request, so a new or revoked token counts at once, without a restart.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainworks.config import Settings, default_home
from trainworks.kernel.cli import FormatOpt, group, usage_errors
from trainworks.kernel.render import OutputFormat, print_data, print_status
from trainworks.tokens.rules import TokenError

if TYPE_CHECKING:
    from trainworks.tokens.store import TokenStore

app = group("admin", "Operator tools.")
tokens_app = group("tokens", "API tokens scoped to projects.")
app.add_typer(tokens_app, name="tokens")
tls_app = group("tls", "TLS for `serve --tls-cert/--tls-key`: a local CA and a server certificate.")
app.add_typer(tls_app, name="tls")

HomeOpt = Annotated[
    Path | None,
    typer.Option("--home", help="The server's state folder (default $TRAINWORKS_HOME or ~/.trainworks)."),
]
DatabaseOpt = Annotated[
    str | None,
    typer.Option(
        "--database-url", envvar="TRAINWORKS_DATABASE_URL", help="The server's database, when not SQLite."
    ),
]


# ====================================================================== tokens
def _token_store(home: Path | None, database_url: str | None) -> TokenStore:
    # The database's modules only here: every other command of the CLI starts without them (~0.3 s).
    from trainworks.store.database import Database
    from trainworks.tokens.store import TokenStore

    settings = Settings(home=home or default_home(), database_url=database_url)
    if database_url is None and not (settings.home / "trainworks.db").exists():
        settings.home.mkdir(parents=True, exist_ok=True)  # tokens made before the server first starts
    return TokenStore(Database(settings.db_url))


@tokens_app.command("create")
@usage_errors(TokenError)
def create_token(
    project: Annotated[
        list[str] | None,
        typer.Option("--project", help="A project the token may use (repeatable; * for all projects)."),
    ] = None,
    admin: Annotated[
        bool, typer.Option("--admin", help="Also /metrics, unowned buckets and listings across projects.")
    ] = False,
    description: Annotated[str, typer.Option("--description", help="Who or what the token is for.")] = "",
    home: HomeOpt = None,
    database_url: DatabaseOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Make a token and print it, once: only its hash is kept."""
    record, token = _token_store(home, database_url).create(project or [], admin, description)
    if format != OutputFormat.human:
        print_data({**record.as_dict(), "token": token}, format)
        return
    scope = "all projects" if "*" in record.projects else ", ".join(record.projects)
    print_status(
        f"Created token {record.id} for {scope}{' (admin)' if admin else ''}. "
        "It is shown only now: keep it somewhere safe."
    )
    sys.stdout.write(token + "\n")  # alone on stdout: TOKEN=$(trainworks admin tokens create ...)


@tokens_app.command("list")
@usage_errors(TokenError)
def list_tokens(
    home: HomeOpt = None, database_url: DatabaseOpt = None, format: FormatOpt = OutputFormat.human
) -> None:
    """The tokens' records (never the tokens)."""
    records = _token_store(home, database_url).list()
    if format != OutputFormat.human:
        print_data([r.as_dict() for r in records], format)
        return
    if not records:
        print_status("No tokens.")
        return
    sys.stdout.write(f"{'ID':<14}{'PROJECTS':<30}{'ADMIN':<7}{'STATE':<9}{'CREATED':<22}DESCRIPTION\n")
    for r in records:
        created = r.create_time.strftime("%Y-%m-%d %H:%M:%S")
        state = "revoked" if r.revoked else "active"
        projects = ",".join(r.projects)
        admin = "yes" if r.admin else "no"
        sys.stdout.write(f"{r.id:<14}{projects:<30}{admin:<7}{state:<9}{created:<22}{r.description}\n")


@tokens_app.command("revoke")
@usage_errors(TokenError)
def revoke_token(
    token_id: Annotated[str, typer.Argument(metavar="ID", help="The token's ID (see `admin tokens list`).")],
    home: HomeOpt = None,
    database_url: DatabaseOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Revoke a token: the server refuses it from the next request on."""
    record = _token_store(home, database_url).revoke(token_id)
    if format != OutputFormat.human:
        print_data(record.as_dict(), format)
        return
    print_status(f"Revoked token {record.id}.")


# ====================================================================== tls
@tls_app.command("init")
def tls_init(
    folder: Annotated[
        Path | None,
        typer.Option("--dir", help="Where the files go (default: tls in $TRAINWORKS_HOME or ~/.trainworks)."),
    ] = None,
    name: Annotated[
        list[str] | None,
        typer.Option("--name", help="Another host name or IP address for the certificate (repeatable)."),
    ] = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Make a local CA and a server certificate for localhost, 127.0.0.1 and ::1, and say how to use them.

    Run again, it keeps the CA (clients that trust it keep working) and issues the server certificate again
    only when it is missing, expires within 30 days or lacks a name asked for."""
    from trainworks.tls import TlsError, init_local_ca  # cryptography: only for this command

    with usage_errors(TlsError):
        made = init_local_ca(folder or default_home() / "tls", name or [])
    if format != OutputFormat.human:
        paths = {"ca": made.ca, "caKey": made.ca_key, "cert": made.server, "key": made.server_key}
        print_data(
            {
                **{k: str(v) for k, v in paths.items()},
                "bundle": str(made.bundle),
                "names": list(made.names),
                "caCreated": made.ca_created,
                "certIssued": made.server_issued,
            },
            format,
        )
        return
    print_status(f"{'Made a new' if made.ca_created else 'Kept the'} CA: {made.ca} (its key: {made.ca_key}).")
    did = "Issued" if made.server_issued else "Kept"
    print_status(f"{did} the server certificate for {', '.join(made.names)}: {made.server}.")
    ca, cert, key, bundle = (
        shlex.quote(str(p)) for p in (made.ca, made.server, made.server_key, made.bundle)
    )
    sys.stdout.write(
        f"""Serve HTTPS, and gRPC over TLS:
  trainworks serve --tls-cert {cert} --tls-key {key} --grpc-port 50051

Trust the CA where clients run:
  export GRPC_DEFAULT_SSL_ROOTS_FILE_PATH={ca}  # gRPC: aiplatform.init(api_endpoint="localhost:50051"), Node
  export REQUESTS_CA_BUNDLE={ca}  # requests: REST transports (https://localhost:8080), google-cloud-storage
  export SSL_CERT_FILE={ca}  # Python's ssl and httpx: trainworks --endpoint https://localhost:8080
Each replaces the system's roots for its clients: where they must reach other HTTPS sites too, name
{bundle} (the system's roots and this CA) instead.
"""
    )
