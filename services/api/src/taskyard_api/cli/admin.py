"""``taskyard-admin``: manage the API keys (create, list, revoke), the tenants' webhook signing secrets and
their LLM budgets directly in the database.

A new key is printed once, alone on stdout, so it can be piped into a secret store; it is never logged and
cannot be shown again (only its hash is stored). ``keys list`` never prints a secret. ``webhooks secret``
prints a tenant's signing secret alone on stdout (creating it when the tenant has none); ``--rotate``
replaces it: the broker agents sign with the new one within ``SECRET_CACHE_SECONDS`` (30 s). ``budget``
shows, lists and sets the tenants' ``monthly_budget`` and ``max_cost_per_task`` (USD; ``none`` removes one);
API processes and workers apply a change within their cache periods (a few seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

import asyncpg
from pydantic import ValidationError

from taskyard_common.errors import StoreUnavailable
from taskyard_common.service import describe_invalid_settings, fail_config
from taskyard_common.settings import DbSettings
from taskyard_common.store import DEFAULT_TENANT
from taskyard_common.store.budgets import BudgetStore
from taskyard_common.store.keys import TENANT_PATTERN, ApiKey, KeyStore, Role
from taskyard_common.store.spend import SpendStore
from taskyard_common.store.webhook_secrets import WebhookSecretStore

PROG = "taskyard-admin"


def _tenant(text: str) -> str:
    if not re.match(TENANT_PATTERN, text):
        raise argparse.ArgumentTypeError(
            f"not a tenant name: {text!r} (lowercase letters, digits, '_', '.', '-'; at most 63)"
        )
    return text


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Administer taskyard: API keys (tenants and roles) of the REST API, the tenants' "
        "webhook signing secrets and their LLM budgets.",
        epilog="Connects to TASKYARD_DB_URL (or DATABASE_URL), schema TASKYARD_DB_SCHEMA (default taskyard); "
        "run taskyard-migrate first.",
    )
    groups = parser.add_subparsers(dest="group", required=True, metavar="{keys,webhooks,budget}")
    keys = groups.add_parser("keys", help="create, list and revoke API keys")
    actions = keys.add_subparsers(dest="action", required=True, metavar="{create,list,revoke}")
    create = actions.add_parser(
        "create",
        help="create a key and print it (once) to stdout",
        description="Create an API key. The key is printed once, alone on stdout; store it now.",
    )
    create.add_argument("--tenant", required=True, type=_tenant, help="the tenant the key acts for")
    create.add_argument(
        "--role",
        required=True,
        choices=[r.value for r in Role],
        help="submitter: submit, cancel and read; reader: read only; admin: all, dead letters included",
    )
    create.add_argument("--name", default="", help="a label for people (who or what uses the key)")
    listing = actions.add_parser("list", help="list keys (never their secrets)")
    listing.add_argument("--tenant", type=_tenant, help="only this tenant's keys")
    revoke = actions.add_parser("revoke", help="revoke a key: refused from the next request on")
    revoke.add_argument("id", help="the key's public id, tyk_<8 hex>")
    webhooks = groups.add_parser("webhooks", help="the tenants' webhook signing secrets")
    webhook_actions = webhooks.add_subparsers(dest="action", required=True, metavar="{secret}")
    secret = webhook_actions.add_parser(
        "secret",
        help="print a tenant's signing secret (created if it has none)",
        description="Print the tenant's webhook signing secret (whsec_...), alone on stdout; receivers "
        "verify each delivery's webhook-signature with it.",
    )
    secret.add_argument("--tenant", default=DEFAULT_TENANT, type=_tenant, help="default: %(default)s")
    secret.add_argument(
        "--rotate", action="store_true", help="replace it with a new secret (the old one stops verifying)"
    )
    _budget_parser(groups)
    return parser


def _usd(text: str) -> float | None:
    if text.lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an amount in USD: {text!r} (or none)") from None
    if not 0 <= value <= 1e12:
        raise argparse.ArgumentTypeError(f"out of range: {text!r}")
    return value


def _budget_parser(groups: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    budget = groups.add_parser("budget", help="the tenants' LLM budgets (USD)")
    actions = budget.add_subparsers(dest="action", required=True, metavar="{show,list,set}")
    show = actions.add_parser("show", help="a tenant's budgets and what its tasks cost this month")
    show.add_argument("--tenant", default=DEFAULT_TENANT, type=_tenant, help="default: %(default)s")
    actions.add_parser("list", help="every tenant with a budget")
    change = actions.add_parser(
        "set",
        help="set a tenant's budgets (an option left out keeps its value; none removes the limit)",
        description="Past monthly_budget (the tenant's tasks of one UTC month) submissions are refused "
        "(budget-exhausted); a task that reached max_cost_per_task fails budget_exceeded before its next LLM "
        "call.",
    )
    change.add_argument("--tenant", default=DEFAULT_TENANT, type=_tenant, help="default: %(default)s")
    change.add_argument("--monthly-budget", type=_usd, default=..., metavar="USD|none")
    change.add_argument("--max-cost-per-task", type=_usd, default=..., metavar="USD|none")


def _limit(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


async def _budget(args: argparse.Namespace, store: KeyStore, settings: DbSettings) -> int:
    budgets = BudgetStore(store.pool, acquire_timeout=settings.command_timeout_seconds)
    if args.action == "list":
        print("tenant\tmonthly_budget\tmax_cost_per_task\tupdated_at")
        for budget in await budgets.all():
            updated = budget.updated_at.isoformat(timespec="seconds") if budget.updated_at else "-"
            print(
                f"{budget.tenant}\t{_limit(budget.monthly_budget)}\t{_limit(budget.max_cost_per_task)}\t{updated}"
            )
        return 0
    budget = await budgets.get(args.tenant)
    if args.action == "set":
        monthly = budget.monthly_budget if args.monthly_budget is ... else args.monthly_budget
        per_task = budget.max_cost_per_task if args.max_cost_per_task is ... else args.max_cost_per_task
        if per_task == 0:
            print(f"{PROG}: --max-cost-per-task must be more than 0 (or none)", file=sys.stderr)
            return 2
        budget = await budgets.set(args.tenant, monthly_budget=monthly, max_cost_per_task=per_task)
    spend = SpendStore(store.pool, acquire_timeout=settings.command_timeout_seconds)
    now = datetime.now(UTC)
    spent = await spend.spent(args.tenant, now.replace(day=1, hour=0, minute=0, second=0, microsecond=0))
    print(f"tenant\t{budget.tenant}")
    print(f"monthly_budget\t{_limit(budget.monthly_budget)}")
    print(f"max_cost_per_task\t{_limit(budget.max_cost_per_task)}")
    print(f"spent_this_month\t{spent:.6f}")
    return 0


def _row(key: ApiKey) -> str:
    revoked = key.revoked_at.isoformat(timespec="seconds") if key.revoked_at else "-"
    return "\t".join(
        (key.id, key.tenant, key.role.value, key.created_at.isoformat(timespec="seconds"), revoked, key.name)
    )


async def _run(args: argparse.Namespace, settings: DbSettings) -> int:
    store = await KeyStore.open(settings)
    try:
        if args.group == "budget":
            return await _budget(args, store, settings)
        if args.group == "webhooks":
            secrets = WebhookSecretStore(store.pool, acquire_timeout=settings.command_timeout_seconds)
            print(await (secrets.rotate(args.tenant) if args.rotate else secrets.secret(args.tenant)))
            if args.rotate:
                print(f"rotated the webhook secret of tenant {args.tenant}", file=sys.stderr)
        elif args.action == "create":
            record, key = await store.create(tenant=args.tenant, role=Role(args.role), name=args.name)
            print(key)
            print(
                f"created {record.id} (tenant {record.tenant}, role {record.role.value}); the key above is "
                "shown only this once",
                file=sys.stderr,
            )
        elif args.action == "list":
            print("id\ttenant\trole\tcreated_at\trevoked_at\tname")
            for record in await store.list(args.tenant):
                print(_row(record))
        else:
            if not await store.revoke(args.id):
                print(f"{PROG}: no live key {args.id!r} (unknown or already revoked)", file=sys.stderr)
                return 1
            print(f"revoked {args.id}")
    finally:
        await store.close()
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        settings = DbSettings()
    except ValidationError as exc:
        fail_config(PROG, f"invalid configuration:\n{describe_invalid_settings(exc)}")
    try:
        code = asyncio.run(_run(args, settings))
    except asyncpg.UndefinedTableError:
        print(f"{PROG}: tables missing in schema {settings.db_schema}: run taskyard-migrate", file=sys.stderr)
        sys.exit(1)
    except asyncpg.PostgresError as exc:
        print(f"{PROG}: PostgreSQL refused: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
    except (StoreUnavailable, OSError, TimeoutError, asyncpg.InterfaceError, ValueError) as exc:
        # Only the kind: some client-side messages quote the connection string.
        print(f"{PROG}: cannot reach PostgreSQL: {type(exc).__name__}", file=sys.stderr)
        sys.exit(1)
    sys.exit(code)
