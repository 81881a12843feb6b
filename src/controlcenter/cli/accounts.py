"""`controlcenter users ...` and `controlcenter tokens ...` (docs/reference.md, docs/accounts.md).

The command line acts as the operator: no role limit, but the last active super administrator
is protected as in the API. Passwords come from `--password-stdin` (scripts), from a prompt
without echo on a terminal, or are generated and printed once.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from pydantic import TypeAdapter, ValidationError

from controlcenter.accounts import tokens, users
from controlcenter.accounts.schemas import LOCATION_ID, PASSWORD_MIN, Email, Password
from controlcenter.auth.models import ROLES
from controlcenter.auth.service import UserExistsError
from controlcenter.cli.support import fail, with_db
from controlcenter.common.emails import normalise_email
from controlcenter.db import Database

EmailOption = Annotated[str, typer.Option(help="The account's e-mail address")]
PasswordStdin = Annotated[
    bool, typer.Option("--password-stdin", help="Read the password from the first line of stdin")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")]

_EMAIL: TypeAdapter[str] = TypeAdapter(Email)
_PASSWORD: TypeAdapter[str] = TypeAdapter(Password)


def _email(value: str) -> str:
    try:
        return _EMAIL.validate_python(value)
    except ValidationError:
        fail(f"not an e-mail address: {value!r}")


def _role(value: str) -> str:
    if value not in ROLES:
        fail(f"role must be one of {', '.join(ROLES)}")
    return value


def _read_password(from_stdin: bool) -> str | None:
    """The chosen password, or None for a generated one."""
    if from_stdin:
        value = sys.stdin.readline().rstrip("\r\n")
        if not value:
            fail("empty password")
    elif sys.stdin.isatty():
        value = typer.prompt(
            "Password (empty for a generated one)", hide_input=True, default="", show_default=False
        )
        if not value:
            return None
        if typer.prompt("Repeat the password", hide_input=True, default="") != value:
            fail("the passwords do not match")
    else:
        return None
    try:
        return _PASSWORD.validate_python(value)
    except ValidationError:
        fail(f"a password must have at least {PASSWORD_MIN} characters")


def _run(work: Any) -> Any:
    """`with_db(work)`, with the users service's refusals as one-line errors."""
    try:
        return with_db(work)
    except users.NotFoundError as exc:
        fail(f"no user with e-mail {exc}")
    except users.LastSuperAdminError:
        fail(users.LAST_SUPER_ADMIN.lower())
    except UserExistsError as exc:
        fail(f"a user with e-mail {exc} already exists")


def _table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        typer.echo("  ".join(cells).rstrip())


def users_create(
    email: EmailOption,
    name: Annotated[str, typer.Option()] = "",
    role: Annotated[str, typer.Option(help="user, admin or super_admin")] = "user",
    password_stdin: PasswordStdin = False,
) -> None:
    """Create a user; prints a generated password when none is given."""
    _role(role)
    address = _email(email)
    password = _read_password(password_stdin)

    async def work(database: Database) -> tuple[Any, str | None]:
        return await users.add_user(
            database,
            actor_role=users.OPERATOR,
            email=address,
            name=name,
            role=role,
            password=password,
        )

    user, generated = _run(work)
    typer.echo(f"created {user.role} {user.email} (id {user.id})")
    if generated:
        typer.echo(f"password: {generated}")


def users_list(as_json: JsonOption = False) -> None:
    """List every account, ordered by e-mail."""

    async def work(database: Database) -> list[Any]:
        everyone: list[Any] = []
        cursor: str | None = None
        while True:
            page, cursor = await users.list_users(database, limit=500, cursor=cursor)
            everyone.extend(page)
            if cursor is None:
                return everyone

    views = [users.admin_view(user) for user in _run(work)]
    if as_json:
        typer.echo(json.dumps(views, indent=2))
        return
    _table(
        [
            [
                view["email"],
                view["role"],
                "disabled" if view["disabled"] else "active",
                view["name"] or "-",
                view["crmLocationId"] or "-",
                view["createdAt"],
                view["id"],
            ]
            for view in views
        ],
        ["EMAIL", "ROLE", "STATUS", "NAME", "CRM LOCATION", "CREATED", "ID"],
    )


def _change(email: str, changes: users.UserChanges) -> Any:
    async def work(database: Database) -> Any:
        user_id = await users.find_user_id(database, email)
        return await users.update_user(database, user_id, changes, actor_role=users.OPERATOR)

    return _run(work)


def users_set_role(
    email: EmailOption,
    role: Annotated[str, typer.Option(help="user, admin or super_admin")],
) -> None:
    """Change a user's role."""
    user = _change(email, users.UserChanges(role=_role(role)))
    typer.echo(f"{user.email} is now {user.role}")


def users_disable(email: EmailOption) -> None:
    """Disable an account: its sessions end and its API tokens are deleted at once."""
    user = _change(email, users.UserChanges(disabled=True))
    typer.echo(f"disabled {user.email}; its sessions and API tokens are revoked")


def users_enable(email: EmailOption) -> None:
    """Enable a disabled account again (it signs in anew; old tokens stay revoked)."""
    user = _change(email, users.UserChanges(disabled=False))
    typer.echo(f"enabled {user.email}")


def users_set_crm(
    email: EmailOption,
    location_id: Annotated[
        str, typer.Option("--location-id", help="The CRM location id; empty unlinks")
    ],
) -> None:
    """Link the user's own CRM sub-account (location)."""
    location_id = location_id.strip()
    if location_id and not LOCATION_ID.fullmatch(location_id):
        fail("a location id is 1-64 letters, digits, '_' or '-'")
    user = _change(email, users.UserChanges(crm_location_id=location_id))
    if location_id:
        typer.echo(f"linked {user.email} to CRM location {location_id}")
    else:
        typer.echo(f"unlinked {user.email} from its CRM location")


def users_delete(email: EmailOption) -> None:
    """Delete a user with their sessions, tokens, conversations and onboarding record."""

    async def work(database: Database) -> int:
        user_id = await users.find_user_id(database, email)
        return await users.delete_user(database, user_id, actor_role=users.OPERATOR)

    cancelled = _run(work)
    typer.echo(f"deleted {normalise_email(email)} ({cancelled} pending outbox jobs cancelled)")


def users_reset_password(email: EmailOption, password_stdin: PasswordStdin = False) -> None:
    """Set a new password (prints a generated one when none is given); sessions end."""
    password = _read_password(password_stdin)

    async def work(database: Database) -> str | None:
        user_id = await users.find_user_id(database, email)
        return await users.reset_password(database, user_id, password, actor_role=users.OPERATOR)

    generated = _run(work)
    typer.echo(f"password of {normalise_email(email)} changed; its sessions are revoked")
    if generated:
        typer.echo(f"password: {generated}")


def tokens_create(email: EmailOption, label: Annotated[str, typer.Option()] = "") -> None:
    """Create an API token and print it once."""

    async def work(database: Database) -> str:
        user_id = await users.find_user_id(database, email)
        return (await tokens.add_token(database, user_id, label))[1]

    typer.echo(_run(work))


def tokens_list(email: EmailOption, as_json: JsonOption = False) -> None:
    """List a user's API tokens (never their secrets)."""

    async def work(database: Database) -> list[Any]:
        user_id = await users.find_user_id(database, email)
        return await tokens.list_tokens(database, user_id)

    views = [tokens.token_view(token) for token in _run(work)]
    if as_json:
        typer.echo(json.dumps(views, indent=2))
        return
    _table(
        [
            [view["id"], view["label"] or "-", view["createdAt"], view["lastUsedAt"] or "never"]
            for view in views
        ],
        ["ID", "LABEL", "CREATED", "LAST USED"],
    )


def tokens_revoke(token_id: Annotated[str, typer.Option("--id", help="The token's id")]) -> None:
    """Revoke (delete) an API token by its id."""

    async def work(database: Database) -> bool:
        return await tokens.revoke_token(database, token_id)

    if not _run(work):
        fail(f"no token with id {token_id}")
    typer.echo(f"revoked token {token_id}")


def register(users_app: typer.Typer, tokens_app: typer.Typer) -> None:
    """Add the commands to the `users` and `tokens` groups of the main command."""
    commands: tuple[tuple[str, Callable[..., None]], ...] = (
        ("create", users_create),
        ("list", users_list),
        ("set-role", users_set_role),
        ("disable", users_disable),
        ("enable", users_enable),
        ("set-crm", users_set_crm),
        ("reset-password", users_reset_password),
        ("delete", users_delete),
    )
    for name, command in commands:
        users_app.command(name)(command)
    for name, command in (
        ("create", tokens_create),
        ("list", tokens_list),
        ("revoke", tokens_revoke),
    ):
        tokens_app.command(name)(command)
