"""The compose deployment as a user runs it: docker-compose.yml on the local images, two
users' keys made in the container, both users driving /mcp with the official Python SDK.

    up --wait; `cortex token create` for ada and bob; each memorizes, recalls, lists and
    forgets, and neither ever sees the other's memories; the web page answers at / with its
    Content-Security-Policy; then `restart`, then `down` and `up` with the volume kept: every
    acknowledged memory is still there and recall gives the same order; `down -v` at the end.
"""

from __future__ import annotations

import httpx2
from harness import Checks, Compose, marker, main, say, sdk_session, structured

MEMORIES = {
    "ada": [
        "Ada prefers green tea in the morning and oolong after lunch",
        "Ada's flight to Lisbon leaves on Friday at 07:40 from gate B12",
        "The staging database for Ada's team runs on port 5433",
        "Ada reviews pull requests for the billing service every Tuesday",
        "Ada is allergic to peanuts; the team dinner needs a menu without them",
    ],
    "bob": [
        "Bob drinks black tea, never coffee, and keeps a kettle at his desk",
        "Bob's flight to Tokyo was moved to Sunday evening",
        "The production database for Bob's project listens on port 6432",
        "Bob owns the deploy pipeline and rotates the signing key every quarter",
        "Bob's daughter has a piano recital on the 14th",
    ],
}
QUERIES = ["what tea does this person drink", "when is the flight", "which port is the database on"]


async def recall_orders(url: str, tokens: dict[str, str], checks: Checks, when: str) -> dict:
    """Each user's recall order for each query, checking no answer holds another's memory."""
    orders: dict = {}
    for user, token in tokens.items():
        async with sdk_session(url, token) as session:
            for query in QUERIES:
                found = structured(
                    await session.call_tool("recall", {"query": query, "limit": 10}), "recall"
                )
                memories = found.get("memories", [])
                checks.check(
                    all(marker(user) in m.get("content", "") for m in memories),
                    f"{when}: {user}'s recall for {query!r} holds only {user}'s memories",
                )
                orders[(user, query)] = [m["id"] for m in memories]
    return orders


async def listed_ids(url: str, token: str) -> set[str]:
    ids: set[str] = set()
    async with sdk_session(url, token) as session:
        cursor = None
        while True:
            args: dict = {"limit": 100}
            if cursor:
                args["cursor"] = cursor
            page = structured(await session.call_tool("list_memories", args), "list_memories")
            ids.update(m["id"] for m in page.get("memories", []))
            cursor = page.get("next_cursor")
            if not cursor:
                return ids


async def scenario() -> int:
    checks = Checks("deployment")
    compose = Compose("cortex-ci-deploy")
    try:
        compose.down(volumes=True)
        say(f"up: healthy after {compose.up():.1f} s on port {compose.port}")
        tokens = {user: compose.token(user) for user in MEMORIES}
        checks.check(tokens["ada"] != tokens["bob"], "two keys made with `cortex token create`")

        acknowledged: dict[str, dict[str, str]] = {user: {} for user in MEMORIES}
        for user, texts in MEMORIES.items():
            async with sdk_session(compose.url, tokens[user]) as session:
                for text in texts:
                    out = structured(
                        await session.call_tool(
                            "memorize", {"content": f"{text} {marker(user)}"}
                        ),
                        "memorize",
                    )
                    acknowledged[user][out["id"]] = text
        say("memorized 5 memories for each user")

        # Recall finds the user's own memory first, and only the user's.
        expected_first = {
            ("ada", QUERIES[0]): MEMORIES["ada"][0],
            ("bob", QUERIES[0]): MEMORIES["bob"][0],
            ("ada", QUERIES[2]): MEMORIES["ada"][2],
            ("bob", QUERIES[2]): MEMORIES["bob"][2],
        }
        before = await recall_orders(compose.url, tokens, checks, "first run")
        for (user, query), text in expected_first.items():
            ids = before[(user, query)]
            checks.check(
                bool(ids) and acknowledged[user].get(ids[0]) == text,
                f"{user}'s first answer to {query!r} is {text!r}",
            )

        # Listing: exactly the user's own memories.
        for user in MEMORIES:
            checks.check(
                await listed_ids(compose.url, tokens[user]) == set(acknowledged[user]),
                f"{user} lists exactly their {len(acknowledged[user])} memories",
            )

        # Forget: bob cannot forget ada's memory; ada can.
        ada_peanuts = next(i for i, t in acknowledged["ada"].items() if "peanuts" in t)
        async with sdk_session(compose.url, tokens["bob"]) as bob:
            refused = await bob.call_tool("forget", {"memory_id": ada_peanuts})
            checks.check(bool(refused.is_error), "bob's forget of ada's memory is refused")
        checks.check(
            ada_peanuts in await listed_ids(compose.url, tokens["ada"]),
            "ada's memory is still there after bob's attempt",
        )
        async with sdk_session(compose.url, tokens["ada"]) as ada:
            structured(await ada.call_tool("forget", {"memory_id": ada_peanuts}), "forget")
        del acknowledged["ada"][ada_peanuts]
        checks.check(
            ada_peanuts not in await listed_ids(compose.url, tokens["ada"]),
            "ada's forgotten memory is gone from her list",
        )
        before = await recall_orders(compose.url, tokens, checks, "after forget")

        # The web page, with its CSP, on the published port.
        async with httpx2.AsyncClient(timeout=30) as http:
            for path in ["/", "/login"]:
                page = await http.get(f"{compose.url}{path}")
                csp = page.headers.get("content-security-policy", "")
                checks.check(
                    page.status_code in (200, 303) and "default-src 'none'" in csp,
                    f"GET {path} answers ({page.status_code}) with its CSP ({csp!r})",
                )

        async def same_as_before(when: str) -> None:
            for user in MEMORIES:
                checks.check(
                    await listed_ids(compose.url, tokens[user]) == set(acknowledged[user]),
                    f"{when}: every acknowledged memory of {user} is there, and nothing else",
                )
            after = await recall_orders(compose.url, tokens, checks, when)
            for key, ids in before.items():
                checks.check(after[key] == ids, f"{when}: recall order for {key} unchanged")

        compose.run("restart")
        compose.wait_healthy("postgres")
        say(f"restart: server healthy again after {compose.wait_healthy('cortex'):.1f} s")
        await same_as_before("after restart")

        compose.down(volumes=False)
        say(f"down, then up with the volume kept: healthy after {compose.up():.1f} s")
        await same_as_before("after down and up")
    except Exception as e:  # noqa: BLE001 - any failure is a failed check, with logs
        checks.check(False, f"scenario stopped: {type(e).__name__}: {e}")
        for service in ["cortex", "postgres"]:
            try:
                print(compose.logs(service), flush=True)
            except Exception:  # noqa: BLE001
                pass
    finally:
        compose.down(volumes=True)
        checks.check(
            compose.container("cortex") == "" and compose.container("postgres") == "",
            "down -v leaves no container",
        )
    return checks.close()


if __name__ == "__main__":
    main(scenario)
