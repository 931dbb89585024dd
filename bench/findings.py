"""The profile findings docs/benchmarks.md keeps from one run to the next: what was measured, what changed."""

PIPELINE_FINDINGS = """\
### Pipeline: broker agent and worker

- **Where a worker's time went** (no-op, 100 in flight): half in the LLM call (the openai SDK and
  httpx/httpcore: building the request, walking every parameter against its type hints, the connection
  pool), a quarter in the store (`start` was a transaction of four round trips: BEGIN, SELECT ... FOR UPDATE,
  UPDATE, COMMIT; `complete` one), the rest AMQP, decoding, bookkeeping. At concurrency 500 (io) a fifth
  went to httpcore's pool, which walks every connection it holds, probing each idle socket, on each request
  and each response, O(n) per call, and which kept only 100 connections alive, so each wave reopened 400.
- **Round trips per task**, explicit specialist, not counting the pool's reset on release (gone too, see
  the submit path's changes): broker agent 2 statements (read the task, record the decision) → 1
  (`route`: one conditional update that also checks the deadline and returns the limits; the task is read
  only when it does not apply); worker 5 (start's transaction of 4, complete) → 1 per burst of deliveries
  plus 1 (`start_many` starts every task that arrived in the same turn of the event loop in one statement,
  rows locked in id order with SKIP LOCKED so concurrent batches never deadlock; anything it does not start
  takes `start`'s full path, so every outcome is unchanged), then `complete`. Publishes per task unchanged
  and already pipelined: one confirmed publish (the broker agent's, many in flight on one channel) and two
  acks; no channel per message.
- **LLM client**: a pool of clients of 32 connections each, sized for the specialist's concurrency, all
  kept alive, each call on the least busy client; the call goes through the SDK's generic `post` with the
  body already in wire form, skipping `create`'s per-parameter transformation (a quarter of the client's
  CPU per call). Errors, auth and parsing are still the SDK's.
- **Measured** (A/B back to back, the same tree without these changes, 2 shared cores, load 3-7): io
  2.42x and 2.47x ideal, 471 and 474 in flight → 1.99x and 1.80x, 500 in flight; the worker's CPU for the
  1,000 tasks 4.3 s → 2.9-3.1 s (startup included); no-op worker CPU per task 3.0 → 2.6 ms, no-op p50
  983 → 146 ms (p99 3.4 → 1.1 s) at the same throughput, which the submit side bounds on such a machine.
- **Not the bottleneck**: the development LLM server (0.4-0.6 ms of CPU per request, idle two thirds of the
  time in the no-op run), JSON (pydantic's Rust encoder and decoder), logging, metrics, prefetch (the
  worker's is its concurrency, the broker agent's 64, and its confirms are awaited concurrently).
- **LLM transport: aiohttp** (`openai[aiohttp]`, the SDK's `DefaultAioHttpClient`, same limits; errors still
  the SDK's, a refused connection now `APITimeoutError` instead of `APIConnectionError`, transient either
  way). CPU per call to the dev LLM (N calls, one process): 0.86 → 0.47 ms at 32 in flight, 0.74 → 0.53
  ms one at a time, 2.8 → 0.6 ms at 500 on one pool. A/B back to back, CPU from `/proc` per process, a CI
  run sharing the machine: no-op (both rows, 10,000 tasks, startup included) worker 23.3 and 24.7 s →
  20.3 and 19.4 s (2.4 → 2.0 ms per task; once the machine was quieter 19.6 → 16.7 s), dev LLM 4.7 →
  4.2 s, the rest unchanged; io worker 3.7 → 2.4 s for the 1,000 tasks, 1.61x → 1.40x ideal. Tried and
  left out, no difference beyond the noise: completing a loop turn's tasks in one statement like
  `start_many` (worker + PostgreSQL, no-op 22.7 s without, 24.5 and 22.0 s with; io 2.6 and 2.7 s: a
  no-op's completions rarely share a turn), uvloop in the worker (16.0-17.8 s against 15.6-19.0 s).
- **The no-op scenario's own load generator**: it posted from an `httpx.AsyncClient` inside the
  benchmark process, which costs about as much CPU per request as the API serving it, on the same two
  cores. Switched to the submit path's lean generator in its own process: explicit specialist 209 → 410/s
  and 377/s, LLM routing 203 → 351/s and 331/s (two runs each, back to back, quiet machine); tasks now
  queue behind the pipeline instead of behind the client, so their latency grew (p50 48 ms → 1.3-4.4 s).
  Tried and left out: a second worker process, as Celery's prefork pool has one per core (315/s against
  377/s in the same run: on two cores the pipeline is bound by total CPU, not by one process).
- **What is left**: after the change, py-spy on the no-op worker: the openai SDK (request building,
  parsing) 28% of its samples, aiohttp 17%, asyncpg 20% (15% in sending on loopback, where the kernel does
  the receiving side's work in the sender's call), aiormq 13%.
"""


# What py-spy showed on the submit path (scenario 5), and what changed; CPU per request from /proc.
SUBMIT_FINDINGS = """\
### Submit path (`POST /v1/tasks`)

Profiled with py-spy (`record -r 250`, raw stacks) on the API process under 32 closed-loop clients, CPU per
request read from `/proc` for the API, PostgreSQL, RabbitMQ and the load generator.

- **The collapse past 8 clients was mostly the load generator.** The first harness drove the API from one
  `httpx.AsyncClient` in the benchmark process: it spent about as much CPU per request as the API and got
  slower per request as its pool grew, on the same two cores. With a bare keep-alive generator in its own
  process (`bench/http_load.py`, ~0.05 ms CPU per request) the same unchanged API gave 449/s at 1 client,
  656/s at 8, 660/s at 32 and 507/s at 64 (instead of 245, 573, 354, 161). What remained of the fall at 64
  clients was queueing on the 10-connection database pool behind two statements and two pool resets per
  submission.
- **Where the API's CPU went** (unchanged code): FastAPI ran the plain-`def` dependencies in a worker thread
  (`run_in_threadpool` and thread wake-ups, ~7-10%); the pure-Python event loop and HTTP parser (asyncio +
  h11, ~15%); four database round trips per submission, since asyncpg's pool sends a reset query
  (`pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`) on every release; `wait_for` of the pool's
  acquire timeout, a task per acquire on Python 3.11; FastAPI validating the returned document again before
  serialising it; `Counter.labels()` per request; FastAPI's native OpenTelemetry checking the global
  providers (reading the environment) on every request although none is configured (3-4%). And a second
  commit per submission: the `published_at` UPDATE after the confirm.
- **Changes**: uvloop + httptools (picked up by uvicorn); async dependencies; a no-op pool reset (asyncpg
  still rolls back an open transaction); `asyncio.timeout` around acquire and release; concurrent
  submissions inserted together (one `INSERT ... SELECT FROM unnest(...)` and one commit for what arrived
  while the previous insert ran; a lone request is inserted at once); `published_at` written behind the 202
  in batches (`UPDATE ... WHERE id = ANY($1)` within 50 ms; a lost batch only means the sweeper announces
  the task once more, and routing applies once; idempotent submissions are still marked before their
  answer); the 202 document serialised once; metric children cached; FastAPI's native telemetry off. With
  the production defaults: API-key look-ups cached 5 s per process (`TASKYARD_API_AUTH_CACHE_SECONDS`, the
  revocation delay; 0 turns it off), and a tenant's concurrent submissions take their rate-limit tokens in
  one statement.
- **Effect**, A/B against the previous code in the same conditions (the machine shared with other work,
  1-min load 6-12): the API's CPU per request at 8-64 clients from 0.95-1.4 ms to 0.5-0.8 ms (about 1.8x
  less), PostgreSQL's from ~0.4-0.5 ms to ~0.1-0.35 ms; with authentication and the rate limit on, the API's
  from 1.2-1.8 ms to 0.7-0.8 ms and PostgreSQL's from 0.7-1.4 ms to 0.4-0.6 ms. RabbitMQ's share (quorum
  queue, persistent, confirmed, ~0.2-0.4 ms) is unchanged. On a loaded machine the wall-clock figures are set
  by the scheduling delays of four processes more than by any one's CPU.
- **What is left**: FastAPI's dependency solving and request/response plumbing are now the largest share of
  the API's CPU (~25%), aio-pika's publish path ~10%.
- **Open event streams and the garbage collector** (issue 13). With 500 idle Server-Sent Events streams open,
  the 32-client closed loop kept its CPU per request (0.82 → 0.89 ms; an idle stream does no work: its
  task's version is checked with all the others in one query every 2 s) but its p99 went from 88-93 ms to
  151-155 ms on the shared machine. The cause was not CPU but pauses: an open stream holds about 250 objects
  the collector tracks (the coroutines, closures and tasks of every middleware layer), 500 of them took the
  process from ~82,000 to ~192,000, and each full collection (several in a 5-s window, set off by the
  objects of requests in flight surviving young collections) stopped the loop for 40-75 ms instead of
  ~30 ms (`gc.callbacks`). Change: once started, the API freezes what exists (`gc.freeze()`: ~80,000
  objects never walked again) and runs a full collection after 100 middle-generation collections instead
  of 10 (`taskyard_api/gc_tuning.py`). A/B in the same process, alternating: without streams p99 43-56 ms,
  with 500 streams 46-54 ms, the difference lost in the machine's noise; full collections no longer fall
  in the window. The streams are measured 2 s after the last one opened: opening 500 (a submission, a
  read, a broker binding each) is a burst of its own.
"""

DURABILITY_FINDINGS = """\
### Durable runs, the event log and wake-ups (issues 11 to 13)

- **What a task costs the store now**, explicit specialist, one LLM call: the submission's INSERT also
  writes the `accepted` event; routing, the start (per burst) and the completion each write their event in
  their own statement (`store/events.py`: one round trip each, as before); the final answer is checkpointed
  (`record_steps`, batched per turn of the event loop) before `complete`: one more round trip per burst of
  answers, and one more `task_steps` row and `llm_call` event per step.
- **Wake-ups**: publishing a wake-up on the events exchange for every change cost the no-op run 10-15%
  (publishes nobody listened to, on the same two cores as RabbitMQ): 248 → 286/s explicit with them
  switched off. Now a change publishes only while its task is watched (`watched_until`, set and renewed by
  the API's watcher), so unwatched tasks cost nothing there.
- **A/B back to back** (this machine, alternating the tree before issue 11, 8b85642, with this one, two
  rounds, `--only noop --only io`): before 313 and 308/s explicit, 276 and 277/s LLM routing, io 2.93 and
  2.91 s; with durable runs and the event log but wake-ups for every change 248 and 238/s, 229 and 228/s,
  3.23 and 3.21 s; with wake-ups for watched tasks only 277-299/s explicit, 254-267/s LLM routing, io
  3.12 s. After issue 12 alone (checkpoints, in-step retries) io was 3.01 s against 2.97 s (+1.3%).
- **Tried and left out**: dropping the event log's foreign key to `tasks` (290 and 263/s without it against
  299 and 267/s with it in the same pair of runs: noise).
"""

WORKFLOW_FINDINGS = """\
### Task groups (issue 14)

- **A group's fan-in was quadratic, and serialised.** Every child's end settles its group (`settle_group`):
  it locked the group row, then counted the group's unfinished children by reading every child's row. For
  a group of 1,000 that is about a million index entries read under one lock that every completing child queues
  for. First `--only group` run (2 shared cores, 1-min load 12.6 before it: other work on the machine):
  the group took **2.00x** the wall time of the same 1,000 tasks submitted singly (93.3 s vs 46.6 s).
- **Changed**: a partial index of the open children (migration 0015, `tasks_group_open_idx`: group children
  not in a final status), asked with `EXISTS`, and asked first **without** the lock: a child's end that
  finds siblings still open stops there; only the end of the last child (whichever commits last sees no
  open sibling) takes the lock, where the check is repeated. The reaper's query for overdue settlements
  uses the same index.
- **After** (the same scenario, load 14.8 before it): the group took **0.55x** the singles' wall time
  (20.9 s vs 37.6 s): one request instead of 1,000 (accepted in 3.6 s with every intake message
  confirmed), no per-request HTTP and rate-limit work. The reduce step ran 0.36 s after the last child
  ended (0.20 s in a smoke run of 10). Both runs shared the machine with other work; the ratio of two
  measurements taken back to back is the figure to read, not either wall time. On a quiet machine (load
  1.1) the same scenario gave 0.98x (6.81 s vs 6.94 s; accepted in 1.2 s, reduce latency 0.08 s): there
  the worker bounds both.
"""

FAIRNESS_FINDINGS = """\
### Tenant fairness (issue 15): the `fairness` scenario

- **Set-up**: two workers of 20 slots on one specialist, tasks of one 2-s LLM call, tenant A capped at
  `max_running` 24 over REST; A submits its tasks over HTTP from 32 clients, B its 20 the moment A's last
  one is accepted (the API with authentication, one admin key per tenant, no rate limit). B's queue wait is
  `routed_at` .. `started_at`; a slot turnover is the median run time of every completed task; A's peak is
  the most of its rows running at one instant (start and finish times); the refusals are the attempt
  histories' `start_deferred` counts.
- **With lanes and parked tasks** ("park, don't churn": a tenant's tasks beyond its lane, or beyond the
  room under its cap, wait parked in the store and the broker agent's feeder publishes them as the lane
  drains; a refused start parks the task instead of sending it round the delay queues; see
  [architecture](architecture.md#tenant-fairness-caps-and-fair-shares)). Measured 2026-12-01 on the 2-core
  development machine shared with other sessions' work (figures of a loaded machine), two full runs
  (`--only fairness`): at commit 5a4bf8c, 1-min load average 11.9 before and 10.9 after, median run time of
  a 2-s call 2.04 s; at commit d62d9e3 (the feeder then marked each task on its own), load 14.7 before and
  18.7 after (about 22 in the middle), median run time 2.16 s:

  | run | A | B's queue wait p50 / p95 / p99 | p95 in turnovers (target < 2) | A's peak running / cap | A's window / ideal at its cap | refusals noted |
  | --- | --- | --- | --- | --- | --- | --- |
  | full, 5a4bf8c | 2,000 | 0.08 s / 0.12 s / 0.17 s | **0.06 (met)** | 24 / 24 | 193 s / 167 s (1.16x) | A tenant_max_running 2 |
  | full, d62d9e3 | 2,000 | 0.19 s / 0.34 s / 1.02 s | **0.16 (met)** | 24 / 24 | 263 s / 167 s (1.58x) | A fair_share 5, B fair_share 1 |
  | e2e (`tests/e2e/test_tenant_fairness.py`) | 200 | 0.13 s / 1.53 s (max) | 0.56 (met) | 12 / 12 | - | - |

  5 and 19 of A's tasks started while B's waited (A's starts within its cap as its own tasks ended). The
  e2e row: one worker of 20 slots, A capped at 12, B 10, 2.5-s LLM call, turnover 2.74 s, load about 14-17;
  B's waits were 0.11-0.14 s for eight tasks and 1.5 s for the last two (the worker's fair share: B's 10th
  task waits for one of A's to end).
- **A tenant alone, without a cap, still flows at full speed**: the `noop` scenario (5,000 instant tasks of
  one tenant, one worker of 100 slots) parks most of its tasks on this machine (the worker falls behind the
  submissions: 4,882 of about 5,200 routed tasks were parked in one run), so every task goes through the
  feeder. Full runs of `--only noop`, niced, 2026-12-01: at commit 5a4bf8c with lanes on, 43.0 and 42.9
  tasks/s (explicit specialist / LLM routing; p50 41.0 s / 33.1 s from submission to finish under the 5,000
  backlog; load 10.8 before, 12.6 after); the same code right after with lanes off at routing
  (`TASKYARD_BROKER_LANE_ENABLED=false`), 39.8 and 46.9 tasks/s (p50 30.2 s / 28.1 s; load 10.9, 10.7);
  the code before lanes (51aeb02), earlier, when other sessions' load was rising (7.9 before, 13.0 after):
  16.4 and 14.7 tasks/s, both runs cut at the 300-s limit (4,908 and 4,403 of 5,000). No cost of the lanes
  shows in the throughput; the pairs are single runs on a loaded machine, so a difference of some 10 %
  either way would not show either.
- **Before** (the same scenario on the code before lanes, 2026-12-01, load 12 to 21): B's p95 19.3 s = 8.1
  turnovers in the full run (2.4 in `--quick`), with 992 `fair_share` and 1,006 `tenant_max_running`
  refusals noted for A: one specialist queue is first in, first out, and every message of A ahead of B's
  (new ones, and refused ones coming back from the delay queues) was a delivery a worker had to take, refuse
  and send round again before B's were reached.
- **What changed, and what bounds it now**: A's lane holds no more messages than the room under its cap
  (0 while it runs 24), so B's messages have almost nothing in front of them and A's backlog costs no
  deliveries while it waits; the refusals fell from about 2,000 to 2-6 (lane overshoot: routings in flight
  at once each see the lane as it was). A's throughput did not suffer (1.16x and 1.58x its ideal, 1.56x
  before, all on a loaded machine): each of A's freed slots waits for the feeder's next round (0.25 s, 0.125 s
  on average) before its next task is published, under a tenth of a 2-s turnover. Not measured: the same on a quiet machine,
  and a tenant without a cap against another (there A's lane is the lane depth, one fleet's worth, 40 here,
  and the worker's fair share parks A's excess).
"""


# Issue 16: the fleet-wide LLM limits, the rpm scenario and the cost of the limits on the hot path.
SPEND_FINDINGS = """\
### LLM spend: fleet-wide limits (issue 16)

- **The rpm figure** (scenario 6, full size: 300 one-call tasks, three worker processes, the catalog's
  `rpm: 600` and the dev LLM server answering 429 above 600 a minute, a shared machine at load 19-22): 300
  of 300 completed; 300 calls answered and **0 refused** (0.00 % 429); answered at **551 a minute, 0.918x
  the limit** over 32.6 s; **0 attempts charged**. The rate sits under the limit rather than on it: each
  process reserves in batches of 0.1 s of the limit and waits for a whole token when short.
- **The hot path**: reserving and settling one call (a request and its estimated tokens, both buckets, the
  limits set far above the load: `rpm` 10^6, `tpm` 10^9) costs **7 µs of CPU** in the calling process and
  12 PostgreSQL statements for 20,000 calls (one per batch), against 2-3 ms of worker CPU per task. Reading
  the provider's `x-ratelimit-*` headers needs the SDK's raw answer, about 10 % more client CPU per call
  (978-1,034 µs parsed, 1,042-1,144 µs raw, 3,000 calls at 32 in flight to the dev LLM, two rounds), so a
  process reads them about once a second per model, not on every answer.
- **The I/O-bound scenario with and without limits** (the target: within 10 %): **not measured reliably
  here.** On the shared two-core machine at load 19-23 (the other sessions' test runs), the full-size pair
  gave 154 s without and 27.2 s with limits (77x and 13.6x the 2-s ideal: the machine, not the code), and a
  `--quick` pair (100 tasks, concurrency 50) 2.93 s without and 3.24 s with (1.11x). Once the machine
  was quieter (load 2.8 before, 5.1 after), one full-size pair: **8.14 s without (4.07x ideal, 396 in
  flight) and 4.21 s with limits (2.11x, 500 in flight)**, which the target row reads as 0.52x, "met"; the
  run without limits always goes first, and the machine was still settling, so that pair shows no cost
  of the limits but does not measure one either. A second pair could not run (the shared services
  answered 503). An estimate from the CPU costs above (not a measurement): a few percent of the worker's
  CPU per task. Repeated pairs on a quiet machine are what would settle the 10 % target.
"""

STORE_FINDINGS = """\
### A large store and retention (issue 19)

- **Run of 2026-12-01, 10 million tasks** (`--only large_store`, the only scenario of that run, on the same
  two shared cores, whose 1-minute load average was 13.6 when it started and 21.9 when it ended: other
  sessions' builds and tests ran throughout; the empty-store rows were measured at about load 14, the full
  ones about 35 minutes later at about load 21): submit p99 940 → 1,331 ms (1.42x), e2e no-op 40.3 → 26.1/s
  (0.65x), submit p99 with retention removing 1,331 → 1,863 ms (1.40x). **None of the three targets is met
  in this run, and the run cannot tell how much of the gap is the store**: every figure is some 20 times
  slower than the same API on a quiet machine (submit p99 below 50 ms at 32 clients), the measurements ran
  half an hour apart under a load that rose by half, and the throughput ratio (0.65) is the ratio of the
  loads (14 / 21 = 0.67). What does not depend on the load points the other way: the API's own CPU per
  submission was 1.63 ms on the empty store and 1.48 ms with 10 million rows.
- **Run of 2026-12-01 at 23:25 UTC, UUIDv7 ids, empty and full alternately** (`--reuse-store
  bench_large_store_10m`, source ded28df, load average 5.4 before and 12.4 after): submit p99 means
  839 → 922 ms (1.10x; rounds 1.07x and 1.13x), e2e no-op means 38.2 → 40.4/s (1.06x; rounds 1.39x and
  0.82x). A second run of the same command at 23:44 UTC (load 12.6 to 12.5): submit p99 0.94x (rounds
  1.07x and 0.76x), e2e 0.87x (rounds 0.81x and 0.92x). The four rounds together: submit p99 1.00x, e2e
  0.95x. The earlier gap does not recur, but the spread between rounds is several times the 10 % the
  targets allow: the targets are still not shown to hold, only no longer shown to fail. The same command
  on a quiet machine settles them.
- **What 10 million finished tasks take**: `tasks` 8.19 GiB with its indexes, `task_events` (20 million
  rows) 2.56 GiB, `idempotency_keys` (1 million) 0.24 GiB; generated and indexed in 34 minutes on the loaded
  machine (`bench/store_fill.py`) with uuid4 ids. With UUIDv7 ids generated oldest first (the ids the
  services make since), the same fill took 1,005 s (17 minutes; `tasks` 8.09 GiB, `task_events` 2.55 GiB,
  `idempotency_keys` 0.29 GiB) at a similar load (1-minute load average 13 to 20): the primary key, kept
  during the load, is now appended to instead of written at random places.
- **Retention while submitting**: one broker agent removed 605 tasks a second with their events and keys
  (8,500 in 14 s, batches of 500) from a backlog of 2.5 million due tasks, on the same two loaded cores as
  the API, the database and the load; a batch reads the oldest rows through the `created_at` index and
  locks only the rows it removes. 605 tasks a second is 52
  million a day, above the "few hundred tasks a second" a fleet writes; more broker agents remove in
  parallel (`SKIP LOCKED`). It is not free: on a machine where the database shares two cores with
  everything, each batch's work is taken from the submit path (p99 1.40x above). On a database with cores
  of its own the retention's share is bounded by `TASKYARD_TASK_RETENTION_BATCH_PAUSE_SECONDS` and
  `_MAX_BATCHES` per interval; that setting has not been measured against the submit path yet. Those 14 s
  are the start of a backlog: worked down for longer (the `store_layout` scenario below, 107,762 tasks in
  406 s) the same code removed 266 tasks a second on average, slower as it went, since each batch walks the
  index entries of the rows the batches before it deleted until vacuum clears them.
- **To settle the 10 % targets**: run on a quiet machine. The scenario now measures two schemas alternately
  (empty, full, empty, full, each phase on services of its own), so a load that drifts shows as a spread
  between the rounds instead of as a ratio; a filled store can be kept and reused:
  `uv run python -m bench.store_fill --schema bench_large_store_10m --tasks 10000000` once, then
  `uv run python -m bench --only large_store --reuse-store bench_large_store_10m` (retention is not
  measured on a reused store: it would remove a quarter of it).
"""

LAYOUT_FINDINGS = """\
### The store's layout (issue 19): the `store_layout` scenario

- **Run of 2026-12-01 at 23:08 UTC** (`--only store_layout`, source ded28df, the only scenario of that run;
  1-minute load average 19.1 before and 9.7 after: other sessions' work and a 10-million-row fill in
  another schema shared the two cores, so absolute figures are slow; the two layouts were measured one
  after the other, plain first, while the load fell, which favours the partitioned rows). 2 million
  finished tasks over 20 days (UUIDv7 ids), copied into `tasks` and `task_events` range-partitioned by task
  id, one partition a day (22 and a default), same columns, checks, indexes and foreign key.
- **Retention of a day's worth** (107,764 tasks: the part day the fill starts in and the next whole day):
  today's batched `DELETE` (`RetentionStore.expire_batch`, batches of 500, with events and keys) took
  406 s, 266 tasks/s; detaching and dropping the same two days' partitions of both tables took 0.49 s.
  The deletes also slowed as they went: each batch walks the `created_at` index from the oldest entry,
  over the entries the batches before it deleted until vacuum removes them (a batch's `SELECT` took over
  a second near the end). A backlog is worked down more slowly than the steady state's small rounds.
- **Look-ups by id** (2,000 random tasks, one connection, asyncpg's prepared statements): plain p50 0.06 ms
  / p99 4.2 ms; partitioned p50 0.52 ms / p99 12.0 ms (8.4x at the median: the statement covers 23
  partitions and prunes at run time; not profiled further).
- **A tenant's list page** (50 rows, `(created_at, id)` keyset order): the same on both, first page p50
  1.6 / 1.7 ms, a page from a cursor at a random time p50 2.1 / 2.1 ms.
- **Inserts** (a task and its first event per transaction, 4 connections, 4,000): plain with UUIDv7 ids
  558/s, p99 26 ms; partitioned 320/s (0.57x), p99 35 ms; plain with uuid4 ids 242/s (0.43x), p99 46 ms.
  The uuid4 row ran last, at the lowest load of the three, and was still the slowest: random keys cost
  the insert path even at 2 million rows (their primary key's leaves spread over the whole index).
- **Decision: the layout stays plain** (details and what would change it:
  [architecture](architecture.md#retention-of-finished-tasks)). Dropping partitions made the retention of a day
  830 times cheaper, but the submit path (the inserts, 0.57x) and the task document's read
  (by id, 8.4x) would pay for it on every task, and a partition could only go once every task in it is
  finished and past the longest retention of any tenant in it. UUIDv7 ids keep the option open: a range of
  ids is a range of creation times, so `tasks` can be partitioned by id without changing its key.
"""
