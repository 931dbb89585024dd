"""``taskyard-admin``: manage the API keys (create, list, revoke), the tenants' webhook signing secrets and
their retention of finished tasks, their limits (``max_running``) and their LLM budgets directly in the
database.

A new key is printed once, alone on stdout, so it can be piped into a secret store; it is never logged and
cannot be shown again (only its hash is stored). ``keys list`` never prints a secret. ``webhooks secret``
prints a tenant's signing secret alone on stdout (creating it when the tenant has none); ``--rotate``
replaces it: the broker agents sign with the new one within ``SECRET_CACHE_SECONDS`` (30 s).
``tenants retention`` shows or sets how many days a tenant's finished tasks are kept (instead of the
deployment's ``TASKYARD_TASK_RETENTION_DAYS``); the broker agents' next retention round applies it.
``tenants list|show|set|unset``
shows, sets and drops any tenant's limits (the REST route reaches only the API key's own tenant); a new cap
applies from the next start a worker attempts.
``budget`` shows, lists and sets the tenants' ``monthly_budget`` and ``max_cost_per_task`` (USD; ``none``
removes one); API processes and workers apply a change within their cache periods (a few seconds).
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
from taskyard_common.store.retention import RetentionStore
from taskyard_common.store.spend import SpendStore
from taskyard_common.store.tenant_limits import TenantLimit, TenantLimitStore
from taskyard_common.store.webhook_secrets import WebhookSecretStore

PROG = "taskyard-admin"


def _tenant(text: str) -> str:
    if not re.match(TENANT_PATTERN, text):
        raise argparse.ArgumentTypeError(
            f"not a tenant name: {text!r} (lowercase letters, digits, '_', '.', '-'; at most 63)"
        )
    return text


def _max_running(text: str) -> int | None:
    if text == "unlimited":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a positive whole number or 'unlimited': {text!r}")
    return value


def _tenant_parsers(
    groups: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    tenants = groups.add_parser("tenants", help="the tenants' limits (max_running) and own retention")
    actions = tenants.add_subparsers(dest="action", required=True, metavar="{list,show,set,unset,retention}")
    actions.add_parser("list", help="list the tenants with limits set")
    show = actions.add_parser("show", help="show a tenant's limits and what it runs now")
    show.add_argument("--tenant", required=True, type=_tenant)
    set_ = actions.add_parser(
        "set",
        help="set a tenant's limits",
        description="Set the tenant's limits. max_running caps its tasks running at once across all "
        "workers; a start over the cap is deferred (uncharged) until one of its tasks ends.",
    )
    set_.add_argument("--tenant", required=True, type=_tenant)
    set_.add_argument(
        "--max-running", required=True, type=_max_running, help="a whole number from 1, or 'unlimited'"
    )
    unset = actions.add_parser("unset", help="drop a tenant's limits (unlimited again)")
    unset.add_argument("--tenant", required=True, type=_tenant)
    return actions


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Administer taskyard: API keys (tenants and roles) of the REST API, the tenants' "
        "webhook signing secrets, the tenants' limits and retention, and their LLM budgets.",
        epilog="Connects to TASKYARD_DB_URL (or DATABASE_URL), schema TASKYARD_DB_SCHEMA (default taskyard); "
        "run taskyard-migrate first.",
    )
    groups = parser.add_subparsers(dest="group", required=True, metavar="{keys,webhooks,tenants,budget}")
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
    tenant_actions = _tenant_parsers(groups)
    retention = tenant_actions.add_parser(
        "retention",
        help="show or set how long a tenant's finished tasks are kept",
        description="Without --days or --clear: print the tenants with their own retention (tenant<TAB>days). "
        "--days N: keep the tenant's finished tasks N days; --clear: back to TASKYARD_TASK_RETENTION_DAYS.",
    )
    retention.add_argument("--tenant", type=_tenant, help="the tenant to set (or the only one to show)")
    change = retention.add_mutually_exclusive_group()
    change.add_argument("--days", type=_days, help="days to keep its finished tasks (1 to 36500)")
    change.add_argument("--clear", action="store_true", help="use the deployment's default again")
    _budget_parser(groups)
    return parser


def _days(text: str) -> int:
    try:
        days = int(text)
    except ValueError:
        days = 0
    if not 1 <= days <= 36500:
        raise argparse.ArgumentTypeError(f"not a number of days from 1 to 36500: {text!r}")
    return days


async def _retention(args: argparse.Namespace, retention: RetentionStore) -> int:
    if args.days is None and not args.clear:
        print("tenant\tdays")
        for tenant, days in sorted((await retention.retention_overrides()).items()):
            if args.tenant is None or tenant == args.tenant:
                print(f"{tenant}\t{days}")
        return 0
    if args.tenant is None:
        print(f"{PROG}: --tenant is needed with --days or --clear", file=sys.stderr)
        return 2
    await retention.set_retention(args.tenant, None if args.clear else args.days)
    what = "the default" if args.clear else f"{args.days} day(s)"
    print(f"tenant {args.tenant} keeps its finished tasks {what}", file=sys.stderr)
    return 0


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


_LIMITS_HEADER = "tenant\tmax_running\trunning\tupdated_at"


def _limit_row(limit: TenantLimit) -> str:
    cap = "unlimited" if limit.max_running is None else str(limit.max_running)
    updated = limit.updated_at.isoformat(timespec="seconds") if limit.updated_at else "-"
    return "\t".join((limit.tenant, cap, str(limit.running), updated))


async def _tenants(args: argparse.Namespace, limits: TenantLimitStore) -> int:
    print(_LIMITS_HEADER)
    if args.action == "list":
        for limit in await limits.list():
            print(_limit_row(limit))
    elif args.action == "show":
        print(_limit_row(await limits.get(args.tenant)))
    elif args.action == "set":
        print(_limit_row(await limits.put(args.tenant, max_running=args.max_running)))
    else:
        await limits.delete(args.tenant)
        print(_limit_row(await limits.get(args.tenant)))
    return 0


async def _run(args: argparse.Namespace, settings: DbSettings) -> int:
    store = await KeyStore.open(settings)
    try:
        if args.group == "tenants":
            if args.action == "retention":
                return await _retention(
                    args, RetentionStore(store.pool, acquire_timeout=settings.command_timeout_seconds)
                )
            return await _tenants(
                args, TenantLimitStore(store.pool, acquire_timeout=settings.command_timeout_seconds)
            )
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
