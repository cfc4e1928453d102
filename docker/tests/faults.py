"""Faults between real hosts: the server and PostgreSQL in their own containers on the
compose network, under a bounded load of memorize and recall from two users.

    (a) `docker network disconnect` PostgreSQL for 10 s: calls fail within the configured
        deadline with the documented error; the first call after reconnecting succeeds
    (b) `docker kill` PostgreSQL mid-write, then start it again
    (c) `docker stop` the server under load: the calls in flight finish within the drain
    (d) `docker restart` the server while the clients keep their keys

In every case: 0 acknowledged memories lost (checked at the end, page by page, with their
text), 0 answers holding another user's memory. The figures go to docs/RELIABILITY.md.
Settings over docker-compose.yml: docker/compose.faults.yml (statement timeout 5 s,
connect timeout 3 s: a call's deadline is 8 s).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field

from harness import Checks, Compose, RawMcp, ToolFailed, docker, main, marker, say, unique

STATEMENT_TIMEOUT = 5
CONNECT_TIMEOUT = 3
DEADLINE = STATEMENT_TIMEOUT + CONNECT_TIMEOUT
# Slack over the deadline for what is not the database's: HTTP, the client, a busy machine.
SLACK = 4.0
WORKERS_PER_USER = 2
USERS = ["ada", "bob"]
# Every call a worker makes is bounded here too, so that a hung call is seen, not waited on.
CALL_TIMEOUT = 60.0


@dataclass
class Call:
    user: str
    tool: str
    start: float
    end: float
    ok: bool
    message: str


@dataclass
class Load:
    """Two users' workers, memorizing and recalling until stopped; every call recorded."""

    url: str
    tokens: dict[str, str]
    calls: list[Call] = field(default_factory=list)
    acknowledged: dict[str, dict[str, str]] = field(default_factory=dict)
    foreign: list[str] = field(default_factory=list)
    running: bool = True

    async def worker(self, user: str, n: int) -> None:
        client = RawMcp(self.url, self.tokens[user], timeout=CALL_TIMEOUT)
        i = 0
        try:
            while self.running:
                i += 1
                memorize = i % 2 == 1
                start = time.monotonic()
                try:
                    if memorize:
                        text = f"{user} keeps note {n}-{i} {unique()} {marker(user)}"
                        out = await client.call("memorize", {"content": text})
                        self.acknowledged.setdefault(user, {})[out["id"]] = text
                    else:
                        out = await client.call("recall", {"query": "keeps note", "limit": 10})
                        for m in out.get("memories", []):
                            if marker(user) not in m.get("content", ""):
                                self.foreign.append(f"{user} got {m.get('content')!r}")
                    ok, message = True, ""
                except ToolFailed as e:
                    ok, message = False, str(e)
                end = time.monotonic()
                tool = "memorize" if memorize else "recall"
                self.calls.append(Call(user, tool, start, end, ok, message))
                # A failing server is not hammered; a healthy one gets a steady trickle.
                await asyncio.sleep(0.3 if not ok else 0.05)
        finally:
            await client.close()

    def between(self, since: float, until: float) -> list[Call]:
        """Calls that overlap [since, until]."""
        return [c for c in self.calls if c.end >= since and c.start <= until]

    def first_started_after(self, t: float) -> Call | None:
        later = sorted((c for c in self.calls if c.start >= t), key=lambda c: c.start)
        return later[0] if later else None


async def wait_for_call_after(load: Load, t: float, timeout: float = 60) -> Call | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        first = load.first_started_after(t)
        if first is not None:
            return first
        await asyncio.sleep(0.1)
    return None


async def first_success_after(load: Load, t: float, timeout: float = 90) -> float | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = [c.end for c in load.calls if c.start >= t and c.ok]
        if done:
            return min(done) - t
        await asyncio.sleep(0.1)
    return None


def acked_count(load: Load) -> int:
    return sum(len(v) for v in load.acknowledged.values())


async def all_listed(url: str, token: str) -> dict[str, str]:
    client = RawMcp(url, token)
    found: dict[str, str] = {}
    cursor = None
    try:
        while True:
            args: dict = {"limit": 500}
            if cursor:
                args["cursor"] = cursor
            page = await client.call("list_memories", args)
            for m in page.get("memories", []):
                found[m["id"]] = m.get("content", "")
            cursor = page.get("next_cursor")
            if not cursor:
                return found
    finally:
        await client.close()


async def scenario() -> int:
    checks = Checks("faults")
    compose = Compose(
        "cortex-ci-faults",
        overrides=["docker/compose.faults.yml"],
        CORTEX_TEST_STATEMENT_TIMEOUT=str(STATEMENT_TIMEOUT),
        CORTEX_TEST_CONNECT_TIMEOUT=str(CONNECT_TIMEOUT),
    )
    figures: list[tuple[str, str]] = []
    load: Load | None = None
    tasks: list[asyncio.Task] = []
    try:
        compose.down(volumes=True)
        say(f"up: healthy after {compose.up():.1f} s")
        tokens = {user: compose.token(user) for user in USERS}
        load = Load(compose.url, tokens)
        tasks = [
            asyncio.create_task(load.worker(user, n))
            for user in USERS
            for n in range(WORKERS_PER_USER)
        ]
        await asyncio.sleep(5)
        checks.check(
            all(c.ok for c in load.calls) and acked_count(load) > 0,
            f"the load runs cleanly before any fault ({len(load.calls)} calls)",
        )
        pg = compose.container("postgres")
        server = compose.container("cortex")

        # (a) PostgreSQL cut off the network for 10 s.
        acked_before = acked_count(load)
        t0 = time.monotonic()
        await asyncio.to_thread(docker, "network", "disconnect", compose.network(), pg)
        await asyncio.sleep(10)
        await asyncio.to_thread(docker, "network", "connect", "--alias", "postgres", compose.network(), pg)
        t1 = time.monotonic()
        during = load.between(t0, t1)
        failed = [c for c in during if not c.ok]
        slowest = max((c.end - c.start for c in during), default=0.0)
        checks.check(bool(failed), f"(a) calls fail while PostgreSQL is cut off ({len(failed)})")
        checks.check(
            slowest <= DEADLINE + SLACK,
            f"(a) every call answers within the {DEADLINE} s deadline (+{SLACK} s): slowest {slowest:.1f} s",
        )
        messages = sorted({c.message[:160] for c in failed})
        # A keyed server checks the key in the database first: 503 with Retry-After when it
        # cannot; a call past that fails with the store's typed error.
        documented = (
            "HTTP 503: the server cannot check API keys right now",
            "did not answer within",
            "cannot connect",
        )
        checks.check(
            all(any(d in m for d in documented) for m in messages),
            f"(a) each failure names the database and the cause: {messages}",
        )
        first = await wait_for_call_after(load, t1)
        checks.check(
            first is not None and first.ok,
            f"(a) the first call after reconnecting succeeds ({first.message if first else 'none'})",
        )
        recovered = await first_success_after(load, t1)
        figures.append(
            (
                "(a) network disconnect 10 s",
                f"{len(failed)} failed, slowest {slowest:.1f} s (deadline {DEADLINE} s), "
                f"first call after reconnect {'ok' if first and first.ok else 'FAILED'}, "
                f"recovered in {recovered if recovered is not None else float('nan'):.1f} s, "
                f"{acked_count(load) - acked_before} acknowledged",
            )
        )
        say(figures[-1][1])
        say(f"(a) errors: {messages}")

        # (b) PostgreSQL killed mid-write, then started again.
        await asyncio.sleep(2)
        acked_before = acked_count(load)
        t0 = time.monotonic()
        await asyncio.to_thread(docker, "kill", pg)
        await asyncio.sleep(3)
        await asyncio.to_thread(docker, "start", pg)
        await asyncio.to_thread(compose.wait_healthy, "postgres")
        t1 = time.monotonic()
        during = load.between(t0, t1)
        failed = [c for c in during if not c.ok]
        slowest = max((c.end - c.start for c in during), default=0.0)
        checks.check(
            slowest <= DEADLINE + SLACK,
            f"(b) every call answers within the deadline while PostgreSQL is down: slowest {slowest:.1f} s",
        )
        recovered = await first_success_after(load, t1)
        checks.check(recovered is not None, "(b) calls succeed again after PostgreSQL restarts")
        figures.append(
            (
                "(b) docker kill PostgreSQL, start again",
                f"{len(failed)} failed while down ({t1 - t0:.1f} s to healthy), slowest "
                f"{slowest:.1f} s, recovered {recovered if recovered is not None else float('nan'):.1f} s "
                f"after healthy, {acked_count(load) - acked_before} acknowledged",
            )
        )
        say(figures[-1][1])

        # (c) The server stopped under load: the calls in flight finish within the drain.
        # Beside the load, a burst of memorize calls on open sessions is sent just before
        # SIGTERM, so that calls are surely in flight when it arrives.
        await asyncio.sleep(3)
        acked_before = acked_count(load)
        burst_clients = [RawMcp(compose.url, tokens[USERS[i % 2]]) for i in range(6)]
        for client in burst_clients:
            await client.open()
        long_text = " ".join(f"detail {k} of the quarterly plan" for k in range(60))
        burst_texts = [
            f"{USERS[i % 2]} burst {i} {unique()} {long_text} {marker(USERS[i % 2])}"
            for i in range(6)
        ]

        async def timed(client: RawMcp, text: str) -> tuple[float, dict | str]:
            try:
                out = await client.call("memorize", {"content": text})
            except ToolFailed as e:
                return time.monotonic(), str(e)
            return time.monotonic(), out

        burst = [
            asyncio.create_task(timed(c, t)) for c, t in zip(burst_clients, burst_texts)
        ]
        await asyncio.sleep(0.1)
        t0 = time.monotonic()
        await asyncio.to_thread(docker, "stop", "-t", "40", server)
        stopped = time.monotonic() - t0
        answers = await asyncio.gather(*burst)
        for client in burst_clients:
            await client.close()
        in_flight = [a for a in answers if a[0] >= t0]
        for i, (_, out) in enumerate(answers):
            if isinstance(out, dict):
                load.acknowledged.setdefault(USERS[i % 2], {})[out["id"]] = burst_texts[i]
        checks.check(bool(in_flight), f"(c) calls were in flight at SIGTERM ({len(in_flight)} of 6)")
        checks.check(
            all(isinstance(out, dict) for _, out in in_flight),
            f"(c) every call in flight at SIGTERM answers: "
            f"{[out for _, out in in_flight if not isinstance(out, dict)]}",
        )
        load_in_flight = [c for c in load.calls if c.start <= t0 - 0.1 and c.end >= t0]
        checks.check(
            all(c.ok for c in load_in_flight),
            f"(c) the load's calls in flight at SIGTERM answer: "
            f"{[c.message for c in load_in_flight if not c.ok]}",
        )
        checks.check(stopped <= 30 + SLACK, f"(c) the server stops within its drain ({stopped:.1f} s)")
        await asyncio.to_thread(docker, "start", server)
        t1 = time.monotonic()
        healthy = await asyncio.to_thread(compose.wait_healthy, "cortex")
        recovered = await first_success_after(load, t1)
        checks.check(recovered is not None, "(c) calls succeed again once the server is back")
        figures.append(
            (
                "(c) docker stop the server under load",
                f"{len(in_flight) + len(load_in_flight)} in flight at SIGTERM, "
                f"{sum(isinstance(o, dict) for _, o in in_flight) + sum(c.ok for c in load_in_flight)} answered; "
                f"stopped in {stopped:.1f} s; back and answering {recovered if recovered is not None else float('nan'):.1f} s "
                f"after start (healthy {healthy:.1f} s); {acked_count(load) - acked_before} acknowledged",
            )
        )
        say(figures[-1][1])

        # (d) The server restarted; the clients keep their keys (and open new sessions).
        await asyncio.sleep(3)
        acked_before = acked_count(load)
        t0 = time.monotonic()
        await asyncio.to_thread(docker, "restart", "-t", "40", server)
        await asyncio.to_thread(compose.wait_healthy, "cortex")
        t1 = time.monotonic()
        recovered = await first_success_after(load, t1)
        checks.check(recovered is not None, "(d) the same keys work after the server restarts")
        figures.append(
            (
                "(d) docker restart the server",
                f"healthy after {t1 - t0:.1f} s, answering {recovered if recovered is not None else float('nan'):.1f} s "
                f"later with the same keys; {acked_count(load) - acked_before} acknowledged",
            )
        )
        say(figures[-1][1])
        await asyncio.sleep(3)
    except Exception as e:  # noqa: BLE001 - any failure is a failed check, with logs
        checks.check(False, f"scenario stopped: {type(e).__name__}: {e}")
        for service in ["cortex", "postgres"]:
            try:
                print(compose.logs(service), flush=True)
            except Exception:  # noqa: BLE001
                pass
    finally:
        if load is not None:
            load.running = False
            await asyncio.gather(*tasks, return_exceptions=True)

    try:
        if load is not None:
            total = acked_count(load)
            lost = 0
            for user in USERS:
                listed = await all_listed(compose.url, load.tokens[user])
                lost += sum(1 for i, text in load.acknowledged.get(user, {}).items()
                            if listed.get(i) != text)
                checks.check(
                    all(marker(user) in text for text in listed.values()),
                    f"{user}'s list holds only {user}'s memories",
                )
            checks.check(lost == 0, f"0 acknowledged memories lost of {total} ({lost} lost)")
            checks.check(
                not load.foreign, f"0 answers holding another user's memory: {load.foreign[:3]}"
            )
            failed_total = sum(1 for c in load.calls if not c.ok)
            figures.append(
                (
                    "all cases",
                    f"{len(load.calls)} calls, {failed_total} failed during faults, "
                    f"{total} acknowledged, {lost} lost, {len(load.foreign)} foreign answers",
                )
            )
            say(figures[-1][1])
    except Exception as e:  # noqa: BLE001
        checks.check(False, f"final count stopped: {type(e).__name__}: {e}")
    finally:
        compose.down(volumes=True)

    if os.environ.get("CORTEX_FAULT_FIGURES"):
        with open(os.environ["CORTEX_FAULT_FIGURES"], "w") as out:
            for case, figure in figures:
                out.write(f"| {case} | {figure} |\n")
    return checks.close()


if __name__ == "__main__":
    main(scenario)
