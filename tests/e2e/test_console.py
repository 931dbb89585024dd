"""The web console in a real browser: Debian's headless Chromium driven by Playwright, against the API,
broker agent and workers as real processes (tests/support/browser.py: skipped without Chromium, failed
under CI=true).

- the task list shows a task submitted over REST, and its detail page shows its events and its streamed
  answer arriving live; an input that is HTML shows as text;
- an operator finds dead letters (also counted on the specialists page), replays one from the console, and
  discards the others in bulk;
- a task group's page shows its children and counts live until its reduce step ran; the schedules page
  lists a schedule, pauses and deletes it;
- with authentication on, the console asks for a key and sends it only as a header, never in a URL.

Every page runs under the console's Content-Security-Policy (Trusted Types included): a violation fails
the test. With ``TASKYARD_CONSOLE_SCREENSHOTS=docs/console`` the screenshots of docs/console.md are written.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page

from taskyard_common.catalog import Catalog
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_common.store.keys import KeyStore, Role
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm
from tests.support.api_client import submit, wait_for_status
from tests.support.browser import chromium
from tests.support.catalogs import write_catalog
from tests.support.dead_letters import reject_work_messages
from tests.support.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]

ANSWER = "Streamed for the console: " + " ".join(f"word{i}" for i in range(24)) + "."
HOSTILE = "<img src=x onerror=alert(1)>"
# Recorded before any script of the page runs (Playwright injects it, whatever the page's policy).
WATCH_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(e.violatedDirective));
"""


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("TASKYARD_CONSOLE_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Console:
    """One browser page on the console, recording what must never happen: dialogs (an injected
    ``alert``), script errors and policy violations."""

    def __init__(self, page: Page, api_url: str, screenshots: Path) -> None:
        self.page = page
        self.url = f"{api_url}/console/"
        self.screenshots = screenshots
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.requests: list[tuple[str, str | None]] = []
        page.on("dialog", lambda dialog: self.dialogs.append(dialog.message))
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on(
            "request",
            lambda request: self.requests.append((request.url, request.headers.get("authorization"))),
        )

    async def open(self, route: str) -> None:
        await self.page.goto(f"{self.url}#{route}")

    async def shot(self, name: str) -> None:
        await self.page.screenshot(path=str(self.screenshots / f"{name}.png"), full_page=True)

    async def check_clean(self) -> None:
        assert self.dialogs == [], f"a dialog opened: {self.dialogs}"
        assert self.errors == [], f"script errors: {self.errors}"
        assert await self.page.evaluate("window.__violations") == [], "the page broke its own policy"


ConsoleFor = Callable[[str], Awaitable["Console"]]


@pytest.fixture
async def console_for(screenshots: Path) -> AsyncIterator[ConsoleFor]:
    async with chromium() as browser:
        context = await browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="light")
        await context.add_init_script(WATCH_VIOLATIONS)
        consoles: list[Console] = []

        async def make(api_url: str) -> Console:
            console = Console(await context.new_page(), api_url, screenshots)
            consoles.append(console)
            return console

        yield make
        for console in consoles:
            await console.check_clean()
        await context.close()


async def test_the_list_shows_a_rest_task_and_its_detail_streams_live(
    cluster: Cluster, devllm: DevLlm, catalog: Catalog, tmp_path: Path, console_for: ConsoleFor
) -> None:
    # The answer starts after a second and streams for about three more: long enough to watch it arrive.
    await devllm.script(
        cluster.model,
        [{"delay_seconds": 1.0, "chunk_delay_seconds": 0.12, "content": ANSWER}],
        repeat_last=True,
    )
    await cluster.start_api()
    await cluster.start_broker_agent()
    await cluster.start_worker(
        "general", TASKYARD_CATALOG_PATH=str(write_catalog(catalog, tmp_path, stream=True))
    )
    console = await console_for(cluster.api_url)
    page = console.page
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as api:
        hostile = await submit(
            api, {"input": HOSTILE, "specialist": "general", "metadata": {"source": "test"}}
        )
        await wait_for_status(api, hostile["id"], {"completed"})

        # The list shows a task submitted over REST, its status moving live.
        await console.open("/tasks")
        await page.wait_for_selector(f"#tasks tr[data-task-id='{hostile['id']}'][data-status=completed]")
        task = await submit(
            api, {"input": "Summarize: the console shows this live.", "specialist": "general"}
        )
        row = f"#tasks tr[data-task-id='{task['id']}']"
        await page.wait_for_selector(row, timeout=10_000)
        # The untrusted input is text in the list: no element was made of it, nothing ran.
        hostile_row = page.locator(f"#tasks tr[data-task-id='{hostile['id']}'] td.input-preview")
        assert await hostile_row.text_content() == HOSTILE
        await console.shot("tasks")

        # Its detail page: events arrive while it is open, and the answer grows before it completes.
        await page.click(f"{row} a")
        await page.wait_for_selector("#timeline li[data-type=accepted]")
        assert await page.locator("#timeline li[data-type=completed]").count() == 0, "opened before its end"
        await page.wait_for_function(
            "text => { const a = document.getElementById('answer').textContent;"
            " return a.length > 0 && a !== text && text.startsWith(a); }",
            arg=ANSWER,
            timeout=20_000,
        )
        assert await page.locator("#timeline li[data-type=completed]").count() == 0, "partial answer, live"
        await console.shot("task-streaming")
        await page.wait_for_selector("#timeline li[data-type=completed]", timeout=30_000)
        assert await page.text_content("#answer") == ANSWER
        assert await page.text_content("#stream-state") == "ended"
        kinds = await page.eval_on_selector_all("#timeline li", "items => items.map(i => i.dataset.type)")
        assert kinds[:3] == ["accepted", "routed", "attempt_started"] and "token" in kinds
        assert kinds[-2:] == ["llm_call", "completed"]
        await page.wait_for_selector(".title-row .badge.status-completed")
        await console.shot("task")

        # The hostile input's own page: shown as text, in the input and nowhere as markup.
        await console.open(f"/tasks/{hostile['id']}")
        await page.wait_for_selector("#timeline li[data-type=completed]")
        assert await page.text_content("#input") == HOSTILE
        assert await page.locator("main img").count() == 0


async def test_an_operator_replays_a_dead_letter_from_the_console(
    cluster: Cluster, devllm: DevLlm, amqp_settings: AmqpSettings, console_for: ConsoleFor
) -> None:
    await devllm.script(cluster.model, [{"content": "done after the replay"}], repeat_last=True)
    await cluster.start_api()
    await cluster.start_broker_agent()
    console = await console_for(cluster.api_url)
    page = console.page
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as api:
        # Three tasks die in the general queue (no worker runs yet: the test plays a broken one).
        doomed = [
            await submit(api, {"input": f"Ticket {n}: my refund never arrived.", "specialist": "general"})
            for n in range(3)
        ]
        await reject_work_messages(amqp_settings, "general", 3)
        for task in doomed:
            await wait_for_status(api, task["id"], {"dead_lettered"})

        await console.open("/dead-letters")
        replayed = doomed[0]["id"]
        row = f"#dead-letters tr[data-task-id='{replayed}']"
        await page.wait_for_selector(row)
        assert await page.locator("#dead-letters tbody tr[data-task-id]").count() == 3
        await page.wait_for_selector(f"{row} td.input-preview:has-text('Ticket 0')")
        await console.shot("dead-letters")

        # The specialists page counts them too (and what is queued or running: nothing yet).
        await console.open("/specialists")
        counted = "#specialists tr[data-specialist=general] td[data-count=dead-letters]"
        await page.wait_for_selector(f"{counted}:has-text('3')")
        assert (
            await page.text_content("#specialists tr[data-specialist=general] td[data-count=queued]") == "0"
        )
        await console.shot("specialists")
        await console.open("/dead-letters")
        await page.wait_for_selector(row)

        # The cause is fixed (a worker runs now); the operator replays the first one.
        await cluster.start_worker("general")
        await page.click(f"{row} button.replay")
        await page.wait_for_selector("#outcome .notice.ok:has-text('Replayed 1 dead letter')")
        await page.wait_for_selector(row, state="detached")
        document = await wait_for_status(api, replayed, {"completed", "failed", "dead_lettered"})
        assert document["status"] == "completed" and document["result"]["output"] == "done after the replay"
        assert document["attempt_history"][-1]["event"] == "replayed"

        # The other two are discarded at once, after the confirmation.
        await page.check("#select-all")
        await page.click("#discard-selected")
        await page.wait_for_selector("#confirm-discard[open]")
        await console.shot("dead-letters-discard")
        await page.click("#confirm")
        await page.wait_for_selector("#outcome .notice.ok:has-text('Discarded 2 dead letter')")
        assert await page.locator("#dead-letters tbody tr[data-task-id]").count() == 0
        assert (await api.get("/v1/dead-letters")).json()["items"] == []
        for task in doomed[1:]:
            assert (await api.get(f"/v1/tasks/{task['id']}")).json()["status"] == "dead_lettered"

        # The replayed task's page tells the whole story: dead-lettered, replayed, completed.
        await console.open(f"/tasks/{replayed}")
        await page.wait_for_selector("#timeline li[data-type=completed]")
        kinds = await page.eval_on_selector_all("#timeline li", "items => items.map(i => i.dataset.type)")
        assert kinds[kinds.index("dead_lettered") + 1] == "replayed"
        await console.shot("task-replayed")


async def test_a_group_and_the_schedules_in_the_console(
    cluster: Cluster, devllm: DevLlm, console_for: ConsoleFor
) -> None:
    await devllm.script(cluster.model, [{"content": "a child's answer"}], repeat_last=True)
    await cluster.start_api()
    await cluster.start_broker_agent()
    await cluster.start_worker("general")
    console = await console_for(cluster.api_url)
    page = console.page
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as api:
        made = await api.post(
            "/v1/task-groups",
            json={
                "tasks": [{"input": f"Summarize item {n}.", "specialist": "general"} for n in range(2)],
                "reduce": {"specialist": "general"},
            },
        )
        assert made.status_code == 202, made.text
        group = made.json()

        # The group's page: its children and counts, live until the reduce step has run.
        await console.open(f"/groups/{group['id']}")
        await page.wait_for_selector(".title-row .badge.status-completed", timeout=60_000)
        assert await page.locator("#group-children tr[data-task-id]").count() == 2
        assert await page.text_content("#group-counts tr[data-status=completed] td.num") == "2"
        await console.shot("group")
        # The reduce step's own page links back to the group.
        await page.click("dd a[href^='#/tasks/']")
        await page.wait_for_selector(f"dd a[href='#/groups/{group['id']}']")

        made = await api.post(
            "/v1/schedules",
            json={
                "cron": "0 0 1 1 *",
                "timezone": "UTC",
                "task": {"input": HOSTILE, "specialist": "general"},
            },
        )
        assert made.status_code == 201, made.text
        schedule = made.json()
        await console.open("/schedules")
        row = f"#schedules tr[data-schedule-id='{schedule['id']}']"
        await page.wait_for_selector(f"{row}[data-paused=false]")
        assert HOSTILE in (await page.text_content(f"{row} td.input-preview") or "")
        await console.shot("schedules")
        await page.click(f"{row} button[data-action=pause]")
        await page.wait_for_selector(f"{row}[data-paused=true]")
        assert (await api.get(f"/v1/schedules/{schedule['id']}")).json()["paused"] is True
        await page.click(f"{row} button[data-action=delete]")
        await page.wait_for_selector(row, state="detached")
        assert (await api.get(f"/v1/schedules/{schedule['id']}")).status_code == 404


async def test_with_authentication_the_key_is_asked_for_and_only_sent_as_a_header(
    cluster: Cluster, db_settings: DbSettings, console_for: ConsoleFor
) -> None:
    keys = await KeyStore.open(db_settings)
    try:
        _, reader = await keys.create(tenant="acme", role=Role.READER, name="console test")
        _, admin = await keys.create(tenant="acme", role=Role.ADMIN, name="console test")
    finally:
        await keys.close()
    await cluster.start_api(TASKYARD_API_AUTH_ENABLED="true", TASKYARD_API_AUTH_CACHE_SECONDS="0")
    console = await console_for(cluster.api_url)
    page = console.page

    await console.open("/tasks")
    await page.wait_for_selector("#api-key")
    await console.shot("key")
    wrong = f"tyk_wrong_{uuid.uuid4().hex}"
    await page.fill("#api-key", wrong)
    await page.click("form.key-form button[type=submit]")
    await page.wait_for_selector("text=The API refused this key")
    await page.fill("#api-key", reader)
    await page.click("form.key-form button[type=submit]")
    await page.wait_for_selector("#tasks")
    assert await page.evaluate("sessionStorage.getItem('taskyard.apiKey')") == reader
    assert await page.evaluate("localStorage.length") == 0

    # A reader may not see dead letters: the console says an admin key is needed.
    await console.open("/dead-letters")
    await page.wait_for_selector("text=Dead letters need an admin API key")
    await page.click("text=Use another key")
    await page.fill("#api-key", admin)
    await page.click("form.key-form button[type=submit]")
    await page.wait_for_selector("#dead-letters")

    api_requests = [(url, auth) for url, auth in console.requests if "/v1/" in url]
    assert api_requests, "the console called the API"
    for url, _ in console.requests:
        assert reader not in url and admin not in url and "tyk_" not in url, url
    assert {auth for _, auth in api_requests} <= {f"Bearer {key}" for key in (wrong, reader, admin)} | {None}
    assert any(auth == f"Bearer {admin}" for _, auth in api_requests)

    await page.click("text=Forget key")
    await eventually(
        lambda: page.evaluate("sessionStorage.getItem('taskyard.apiKey') === null"), what="the key forgotten"
    )
