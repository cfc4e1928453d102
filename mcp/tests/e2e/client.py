"""End-to-end check of cortex-mcp with an external, unmodified MCP client: the official
Python SDK (`mcp`, pinned in requirements.txt, installed by scripts/setup-python-client.sh).

Driven by mcp/tests/external_client.rs, which passes the binary cargo built:

    client.py stdio --binary PATH --db PATH
    client.py http  --url URL --token TOKEN --db PATH

In stdio mode the SDK starts the binary itself; in HTTP mode the Rust test has started it.
Every check that fails is printed, and the exit status is non-zero if any did.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from checks import Checks

TOOLS = {"memorize", "recall", "recall_about", "recall_timeline", "list_memories", "forget"}
REQUIRED = {
    "memorize": ["content"],
    "recall": ["query"],
    "recall_about": ["entity"],
    "recall_timeline": [],
    "list_memories": [],
    "forget": ["memory_id"],
}
# Generous: an ambiguous prefix needs a few hundred memorize calls on average.
PHASE_TIMEOUT_SECS = 240


def structured(checks: Checks, result: Any, what: str) -> dict:
    """A successful result's structured content, after checking the text says the same."""
    if not checks.check(not result.is_error, f"{what} succeeds (got {text_of(result)!r})"):
        return {}
    value = result.structured_content or {}
    try:
        same = json.loads(text_of(result)) == value
    except ValueError:
        same = False
    checks.check(same, f"{what}: text content is the structured content as JSON")
    return value


def text_of(result: Any) -> str:
    return result.content[0].text if result.content else ""


def refused(checks: Checks, result: Any, what: str, *needles: str) -> None:
    """A tool-level error whose message contains every needle."""
    message = text_of(result)
    checks.check(bool(result.is_error), f"{what} is refused with isError (got {message!r})")
    for needle in needles:
        checks.check(needle in message, f"{what}: message mentions {needle!r} (got {message!r})")


async def exercise(session: ClientSession, checks: Checks) -> None:
    init = await session.initialize()
    checks.check(init.server_info.name == "cortex-mcp", f"server name ({init.server_info.name})")
    instructions = init.instructions or ""
    checks.check(
        "memorize" in instructions and "recall" in instructions,
        "instructions say when to memorize and recall",
    )

    tools = (await session.list_tools()).tools
    names = {t.name for t in tools}
    checks.check(names == TOOLS, f"exactly the six tools (got {sorted(names)})")
    for tool in tools:
        props = tool.input_schema.get("properties", {})
        for field, spec in props.items():
            checks.check(bool(spec.get("description")), f"{tool.name}.{field} is documented")
        required = sorted(tool.input_schema.get("required", []))
        checks.check(required == REQUIRED.get(tool.name), f"{tool.name} required {required}")
        checks.check(tool.output_schema is not None, f"{tool.name} has an output schema")

    # memorize
    rust = structured(
        checks,
        await session.call_tool(
            "memorize",
            {
                "content": "The user prefers Rust for systems programming",
                "kind": "preference",
                "tags": ["Languages"],
            },
        ),
        "memorize",
    )
    checks.check(rust.get("status") == "stored", f"status stored ({rust.get('status')})")
    checks.check(rust.get("kind") == "preference", "kind kept")
    checks.check(rust.get("tags") == ["languages"], f"tags normalised ({rust.get('tags')})")
    rust_id = rust.get("id", "")
    checks.check(len(rust_id) == 36, f"a full id ({rust_id!r})")
    coffee = structured(
        checks,
        await session.call_tool("memorize", {"content": "The user drinks coffee black"}),
        "memorize a second memory",
    )
    coffee_id = coffee.get("id", "")
    checks.check(coffee.get("kind") == "note", "kind defaults to note")

    # recall
    found = structured(
        checks,
        await session.call_tool("recall", {"query": "systems programming language"}),
        "recall",
    )
    memories = found.get("memories", [])
    checks.check(bool(memories) and memories[0].get("id") == rust_id, "recall ranks the match first")
    if memories:
        top = memories[0]
        for key in ("content", "kind", "tags", "created_at", "score", "dense_rank", "lexical_rank"):
            checks.check(key in top, f"recall result has {key}")

    # list
    listed = structured(checks, await session.call_tool("list_memories", {}), "list_memories")
    ids = [m.get("id") for m in listed.get("memories", [])]
    checks.check(ids == [coffee_id, rust_id], f"list is newest first ({ids})")
    one = structured(checks, await session.call_tool("list_memories", {"limit": 0}), "limit 0")
    checks.check(len(one.get("memories", [])) == 1, "limit 0 is clamped to 1")

    # forget by prefix
    gone = structured(
        checks,
        await session.call_tool("forget", {"memory_id": coffee_id[:8]}),
        "forget by prefix",
    )
    checks.check(gone == {"forgotten": coffee_id}, f"forget names the full id ({gone})")

    # bad inputs
    refused(
        checks,
        await session.call_tool("memorize", {"content": "x", "kind": "opinion"}),
        "an unknown kind",
        "unknown kind",
        "preference",
    )
    refused(
        checks,
        await session.call_tool("memorize", {"content": "   "}),
        "empty content",
        "must not be empty",
    )
    refused(
        checks,
        await session.call_tool("memorize", {"content": "a" * (32 * 1024 + 1)}),
        "oversized content",
        "limit is 32768",
    )
    refused(
        checks,
        await session.call_tool("forget", {"memory_id": "ab"}),
        "a too-short prefix",
        "at least 4 hex",
    )
    refused(
        checks,
        await session.call_tool("forget", {"memory_id": "00000000-0000-4000-8000-000000000000"}),
        "an unknown id",
        "no memory matches",
    )
    refused(
        checks,
        await session.call_tool("recall_about", {"entity": "Ada"}),
        "recall_about of an entity never given",
        "no entity named",
    )
    refused(
        checks,
        await session.call_tool("recall_timeline", {"since": "last tuesday"}),
        "a malformed date",
        "invalid since",
        "YYYY-MM-DD",
    )
    empty = structured(checks, await session.call_tool("recall_timeline", {}), "an empty timeline")
    checks.check(empty == {"events": []}, f"no events yet, no layer flag needed ({empty})")
    refused(
        checks,
        await session.call_tool(
            "memorize", {"content": "x", "event": {"time": "next tuesday", "place": "Lisbon"}}
        ),
        "a structure with a bad event time",
        "invalid event",
        "next tuesday",
    )

    # The caller's structure: entities, a relation and an event, read back with no layer
    # flag and no model on the server.
    met = structured(
        checks,
        await session.call_tool(
            "memorize",
            {
                "content": "Met Ana Silva from Acme in Lisbon on 2026-11-20",
                "subject": "Ana Silva",
                "entities": [{"name": "Ana Silva", "type": "person", "aliases": ["Ana"]}],
                "relations": [{"from": "Ana Silva", "label": "works at", "to": "Acme"}],
                "event": {"time": "2026-11-20", "place": "Lisbon", "type": "meeting"},
            },
        ),
        "memorize with structure",
    )
    met_id = met.get("id", "")
    about = structured(
        checks, await session.call_tool("recall_about", {"entity": "ana"}), "recall_about"
    )
    checks.check(about.get("entity", {}).get("name") == "Ana Silva", f"found by alias ({about})")
    relations = [
        (r.get("label"), r.get("other", {}).get("name")) for r in about.get("relationships", [])
    ]
    checks.check(relations == [("works_at", "Acme")], f"the relation ({relations})")
    about_ids = [m.get("id") for m in about.get("memories", [])]
    checks.check(about_ids == [met_id], f"the memory is linked ({about_ids})")
    timeline = structured(checks, await session.call_tool("recall_timeline", {}), "recall_timeline")
    events = timeline.get("events", [])
    checks.check(
        [(e.get("event_time"), e.get("location"), e.get("memory", {}).get("id")) for e in events]
        == [("2026-11-20T00:00:00Z", "Lisbon", met_id)],
        f"the event ({events})",
    )
    # Gone again, so the id-prefix checks below see only their own memories.
    structured(checks, await session.call_tool("forget", {"memory_id": met_id}), "forget it")

    # An ambiguous prefix: memorize until two ids share their first 4 hex characters.
    by_prefix: dict[str, list[str]] = {}
    collision: list[str] = []
    for n in range(5000):
        out = await session.call_tool("memorize", {"content": f"filler memory {n}"})
        if out.is_error:
            checks.check(False, f"filler memorize {n}: {text_of(out)}")
            break
        new_id = out.structured_content["id"]
        same = by_prefix.setdefault(new_id[:4], [])
        same.append(new_id)
        if len(same) > 1:
            collision = same
            break
    if checks.check(bool(collision), "found two ids sharing a 4-hex prefix"):
        before = await count(session)
        refused(
            checks,
            await session.call_tool("forget", {"memory_id": collision[0][:4]}),
            "an ambiguous prefix",
            "matches 2 memories",
            "Nothing was deleted",
        )
        checks.check(await count(session) == before, "an ambiguous prefix deletes nothing")


async def count(session: ClientSession) -> int:
    result = await session.call_tool("list_memories", {"limit": 1000})
    return len(result.structured_content["memories"])


async def run_stdio(args: argparse.Namespace, checks: Checks) -> None:
    env = {
        "CORTEX_DB_PATH": args.db,
        "CORTEX_EMBED_PROVIDER": "fake",
        "RUST_LOG": "warn",
        "PATH": os.environ.get("PATH", ""),
    }
    params = StdioServerParameters(command=args.binary, args=[], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await exercise(session, checks)


def initialize_request() -> dict:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw-probe", "version": "0"},
        },
    }


async def run_http(args: argparse.Namespace, checks: Checks) -> None:
    accept = {"Accept": "application/json, text/event-stream"}

    async def probe(method: str, url: str, headers: dict, body: dict | None = None):
        # A fresh connection per probe: a refused request's connection is closed by the
        # server, and reusing it would race that close.
        async with httpx2.AsyncClient(timeout=30.0) as raw:
            return await raw.request(method, url, json=body, headers=headers)

    for label, headers in [
        ("a missing token", accept),
        ("a wrong token", {**accept, "Authorization": "Bearer " + "x" * len(args.token)}),
        ("a token of the wrong scheme", {**accept, "Authorization": f"Basic {args.token}"}),
    ]:
        response = await probe("POST", args.url, headers, initialize_request())
        checks.check(response.status_code == 401, f"{label} gets 401 ({response.status_code})")
        checks.check(
            response.headers.get("www-authenticate", "").startswith("Bearer"),
            f"{label}: the 401 names the Bearer scheme",
        )
        checks.check(
            response.headers.get("connection", "").lower() == "close",
            f"{label}: the 401 closes the connection",
        )
    checks.check(not os.path.exists(args.db), "refused requests touched nothing (no database)")
    response = await probe(
        "POST",
        args.url,
        {**accept, "Authorization": f"Bearer {args.token}", "Host": "evil.example"},
        initialize_request(),
    )
    checks.check(response.status_code == 403, f"an unknown Host gets 403 ({response.status_code})")
    health = await probe("GET", args.url.replace("/mcp", "/healthz"), {})
    checks.check(health.status_code == 200 and health.text == "ok", "/healthz answers ok")

    # The SDK itself cannot get in with a wrong token.
    try:
        bad = httpx2.AsyncClient(headers={"Authorization": "Bearer wrong-token-wrong-token"})
        async with bad, streamable_http_client(args.url, http_client=bad) as (read, write):
            async with ClientSession(read, write) as session:
                await asyncio.wait_for(session.initialize(), 30)
        checks.check(False, "the SDK with a wrong token must fail to initialize")
    except Exception:  # noqa: BLE001 - any failure to connect is the expected outcome
        checks.check(True, "the SDK with a wrong token fails to initialize")

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {args.token}"},
        timeout=httpx2.Timeout(30.0, read=300.0),
    )
    async with http, streamable_http_client(args.url, http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            await exercise(session, checks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["stdio", "http"])
    parser.add_argument("--binary", help="the cortex-mcp binary (stdio)")
    parser.add_argument("--url", help="the server's /mcp URL (http)")
    parser.add_argument("--token", help="the server's bearer token (http)")
    parser.add_argument("--db", required=True, help="the server's CORTEX_DB_PATH")
    args = parser.parse_args()

    checks = Checks(args.mode)
    runner = run_stdio if args.mode == "stdio" else run_http
    try:
        asyncio.run(asyncio.wait_for(runner(args, checks), PHASE_TIMEOUT_SECS))
    except Exception as e:  # noqa: BLE001 - report any crash as a failed check
        checks.check(False, f"the client crashed: {type(e).__name__}: {e!r}")
    return checks.close(f"e2e {args.mode}")


if __name__ == "__main__":
    sys.exit(main())
