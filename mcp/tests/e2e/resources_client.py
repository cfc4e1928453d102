"""More of MCP than tools, through the official Python SDK (`mcp`, pinned in
requirements.txt): resources, resource templates, the prompt, tool annotations and output
schemas, on a protocol version the caller names. Driven by mcp/tests/resources_sdk.rs:

    resources_client.py stdio     --version V --binary PATH --db PATH
    resources_client.py http      --version V --url URL --token TOKEN
    resources_client.py isolation --version V --url URL --key-a KEY --key-b KEY

`--version 2026-07-28` connects as the SDK does by default (`mode="auto"`: it probes
`server/discover` and takes the newest version both sides speak); `--version 2025-11-25`
connects with the initialize handshake (`mode="legacy"`), the version before. Either way
the negotiated version must be the one named, so a server that stopped speaking one fails
here instead of being quietly served the other. Every check that fails is printed, and the
exit status is non-zero if any did.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any
from urllib.parse import quote

import httpx2
from jsonschema.validators import validator_for
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from checks import Checks

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
MIME = "application/json"
# readOnlyHint, destructiveHint, idempotentHint, openWorldHint of each tool.
ANNOTATIONS = {
    "memorize": (False, False, False, False),
    "recall": (True, False, True, False),
    "recall_about": (True, False, True, False),
    "recall_timeline": (True, False, True, False),
    "list_memories": (True, False, True, False),
    "forget": (False, True, True, False),
}
RESOURCES = {"cortex://graph", "cortex://timeline"}
TEMPLATES = {
    "cortex://memory/{id}",
    "cortex://entity/{name}{?limit}",
    "cortex://timeline{?since,until,limit}",
}
NEVER_AN_ID = "00000000-0000-4000-8000-000000000000"
PHASE_TIMEOUT_SECS = 120


class Session:
    """One connected client and the output schemas of its tools."""

    def __init__(self, client: Client, checks: Checks) -> None:
        self.client = client
        self.checks = checks
        self.schemas: dict[str, dict] = {}

    async def tool(self, name: str, arguments: dict) -> dict:
        """A successful call's structured content, validated against the tool's schema here
        (the SDK validates it too; this check does not depend on it doing so)."""
        result = await self.client.call_tool(name, arguments)
        text = result.content[0].text if result.content else ""
        if not self.checks.check(not result.is_error, f"{name} succeeds (got {text!r})"):
            return {}
        value = result.structured_content or {}
        schema = self.schemas.get(name)
        if self.checks.check(schema is not None, f"{name} has an output schema to validate with"):
            errors = [e.message for e in validator_for(schema)(schema).iter_errors(value)]
            self.checks.check(not errors, f"{name}'s result validates against its schema: {errors}")
        return value

    async def read(self, uri: str) -> Any:
        """A resource's one JSON text, parsed (None, and a failed check, if it is refused)."""
        try:
            result = await self.client.read_resource(uri)
        except MCPError as e:
            self.checks.check(False, f"{uri} is readable (got {e.code} {e.error.message!r})")
            return None
        contents = result.contents
        if not self.checks.check(len(contents) == 1, f"{uri}: one content ({contents})"):
            return None
        content = contents[0]
        self.checks.check(content.uri == uri, f"{uri}: the content names it ({content.uri})")
        self.checks.check(content.mime_type == MIME, f"{uri}: {MIME} ({content.mime_type})")
        return json.loads(getattr(content, "text", "null"))

    async def refused(self, uri: str) -> tuple[int, str, Any]:
        """The JSON-RPC error of a read that must fail: (code, message, data)."""
        try:
            result = await self.client.read_resource(uri)
        except MCPError as e:
            return (e.code, e.error.message, e.error.data)
        self.checks.check(False, f"{uri} must not be readable (got {result.contents})")
        return (0, "", None)


def not_found_code(version: str) -> int:
    # The 2026-07-28 spec answers a missing resource with invalid params; before it, -32002.
    return -32602 if version == MODERN else -32002


def connect(server: Any, version: str) -> Client:
    mode = "auto" if version == MODERN else "legacy"
    return Client(server, mode=mode, read_timeout_seconds=60)


def http_server(url: str, token: str) -> Any:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30.0, read=60.0)
    )
    return streamable_http_client(url, http_client=http)


async def handshake(session: Session, version: str) -> None:
    checks, client = session.checks, session.client
    checks.check(client.protocol_version == version, f"negotiated {client.protocol_version}")
    caps = client.server_capabilities
    checks.check(caps.tools is not None, "the tools capability")
    checks.check(caps.resources is not None, "the resources capability")
    checks.check(caps.prompts is not None, "the prompts capability")
    for tool in (await client.list_tools()).tools:
        schema = tool.output_schema
        if checks.check(schema is not None, f"{tool.name} has an output schema"):
            validator_for(schema).check_schema(schema)
            checks.check(schema.get("type") == "object", f"{tool.name}'s output is an object")
            session.schemas[tool.name] = schema
        a = tool.annotations
        hints = (
            (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint)
            if a
            else None
        )
        checks.check(
            hints == ANNOTATIONS.get(tool.name), f"{tool.name} annotations {hints}"
        )


async def exercise(session: Session, version: str) -> None:
    checks, client = session.checks, session.client
    await handshake(session, version)

    listed = (await client.list_resources()).resources
    checks.check({r.uri for r in listed} == RESOURCES, f"resources/list ({listed})")
    checks.check(all(r.mime_type == MIME for r in listed), "listed resources are JSON")
    templates = (await client.list_resource_templates()).resource_templates
    checks.check(
        {t.uri_template for t in templates} == TEMPLATES, f"templates/list ({templates})"
    )
    checks.check(all(t.mime_type == MIME for t in templates), "templates are JSON")
    prompts = (await client.list_prompts()).prompts
    names = [(p.name, [(a.name, a.required) for a in p.arguments or []]) for p in prompts]
    checks.check(
        names == [("recall_context", [("task", True), ("limit", False)])], f"prompts ({names})"
    )

    empty = await session.read("cortex://graph")
    checks.check(empty == {"entities": [], "relations": [], "truncated": False}, f"{empty}")

    # Every tool once, each result validated against its schema.
    met = await session.tool(
        "memorize",
        {
            "content": "Met Ana Silva from Acme in Lisbon on 2026-11-20",
            "kind": "event",
            "subject": "Ana Silva",
            "entities": [{"name": "Ana Silva", "type": "person", "aliases": ["Ana"]}],
            "relations": [{"from": "Ana Silva", "label": "works at", "to": "Acme"}],
            "event": {"time": "2026-11-20", "place": "Lisbon", "type": "meeting"},
        },
    )
    met_id = met.get("id", "")
    rust = await session.tool(
        "memorize", {"content": "The user prefers Rust for systems programming", "tags": ["x"]}
    )
    rust_id = rust.get("id", "")
    await session.tool("recall", {"query": "systems programming language"})
    await session.tool("recall_about", {"entity": "Ana"})
    await session.tool("recall_timeline", {})
    await session.tool("list_memories", {"limit": 1})

    # resources/read of each.
    memory = await session.read(f"cortex://memory/{met_id}") or {}
    checks.check(memory.get("memory", {}).get("id") == met_id, f"the memory by id ({memory})")
    checks.check(memory.get("state") == "live", f"it is live ({memory.get('state')})")
    graph = await session.read("cortex://graph") or {}
    checks.check(
        sorted(e.get("name") for e in graph.get("entities", [])) == ["Acme", "Ana Silva"],
        f"the graph's entities ({graph})",
    )
    checks.check(
        graph.get("relations") == [{"from": "Ana Silva", "label": "works_at", "to": "Acme"}],
        f"the graph's relations ({graph})",
    )
    for name in ["Ana Silva", "ana"]:
        dossier = await session.read(f"cortex://entity/{quote(name)}") or {}
        checks.check(
            dossier.get("entity", {}).get("name") == "Ana Silva"
            and [m.get("id") for m in dossier.get("memories", [])] == [met_id],
            f"the dossier of {name!r} ({dossier})",
        )
    timeline = await session.read("cortex://timeline") or {}
    events = [
        (e.get("event_time"), e.get("memory", {}).get("id")) for e in timeline.get("events", [])
    ]
    checks.check(events == [("2026-11-20T00:00:00Z", met_id)], f"the timeline ({timeline})")
    later = await session.read("cortex://timeline?since=2026-12-01&limit=5") or {}
    checks.check(later == {"events": []}, f"a period with no event ({later})")

    # The prompt.
    prompt = await client.get_prompt("recall_context", {"task": "systems programming language"})
    messages = prompt.messages
    text = messages[0].content.text if messages else ""
    checks.check(
        len(messages) == 1 and messages[0].role == "user", f"one user message ({messages})"
    )
    checks.check(
        "The user prefers Rust" in text and rust_id in text, f"it holds the memory ({text!r})"
    )
    checks.check(text.endswith("Task: systems programming language"), f"and the task ({text!r})")
    try:
        await client.get_prompt("recall_context", {})
        checks.check(False, "a prompt without its task must be refused")
    except MCPError as e:
        checks.check(e.code == -32602 and "task" in e.error.message, f"no task: {e.error}")

    # A correction: the old memory's URI says it was superseded and by which.
    fixed = await session.tool(
        "memorize", {"content": "The user prefers Zig for systems programming", "replaces": rust_id}
    )
    old = await session.read(f"cortex://memory/{rust_id}") or {}
    checks.check(
        old.get("state") == "superseded" and old.get("superseded_by") == [fixed.get("id")],
        f"a corrected memory reads as superseded ({old})",
    )

    # What does not exist: one answer, whatever the reason.
    code = not_found_code(version)
    await session.tool("forget", {"memory_id": met_id})
    for uri in [
        f"cortex://memory/{met_id}",
        f"cortex://memory/{NEVER_AN_ID}",
        "cortex://memory/not-an-id",
        "cortex://entity/Nobody",
        "cortex://nothing",
    ]:
        got = await session.refused(uri)
        checks.check(
            got == (code, "Resource not found", {"uri": uri}), f"{uri} is not found ({got})"
        )
    bad = await session.refused("cortex://timeline?since=last%20tuesday")
    checks.check(bad[0] == -32602 and "since" in bad[1], f"a bad since ({bad})")


async def isolation(args: argparse.Namespace, checks: Checks) -> None:
    """Two users on one server: neither reads anything of the other's."""
    async with connect(http_server(args.url, args.key_a), args.version) as a, connect(
        http_server(args.url, args.key_b), args.version
    ) as b:
        users = {"a": Session(a, checks), "b": Session(b, checks)}
        for session in users.values():
            await handshake(session, args.version)
        own = {}
        for label, person, place in [("a", "Ada Lovelace", "London"), ("b", "Bea Smith", "Oslo")]:
            stored = await users[label].tool(
                "memorize",
                {
                    "content": f"{person} opened the {place} office on 2026-03-0{len(own) + 1}",
                    "subject": person,
                    "entities": [{"name": person, "type": "person"}],
                    "relations": [{"from": person, "label": "opened", "to": f"{place} office"}],
                    "event": {"time": f"2026-03-0{len(own) + 1}", "place": place},
                },
            )
            own[label] = (stored.get("id", ""), person, place)
        for reader, owner in [("a", "b"), ("b", "a")]:
            await cannot_read(users[reader], own[reader], own[owner], args.version)


async def cannot_read(session: Session, mine: tuple, theirs: tuple, version: str) -> None:
    checks = session.checks
    (my_id, me, _), (their_id, them, their_place) = mine, theirs
    label = f"{me} reading {them}'s"
    # Their memory by id reads exactly as an id nobody has; their dossier as a name nobody has.
    for their, nobody in [
        (f"cortex://memory/{their_id}", f"cortex://memory/{NEVER_AN_ID}"),
        (f"cortex://entity/{quote(them)}", "cortex://entity/Nobody%20At%20All"),
    ]:
        got, control = await session.refused(their), await session.refused(nobody)
        checks.check(
            got[:2] == control[:2] == (not_found_code(version), "Resource not found")
            and got[2] == {"uri": their},
            f"{label} {their}: {got} (never existing: {control})",
        )
    # Their memory and entity are in none of the caller's resources or prompt; the caller's
    # own are (so the checks cannot pass on an empty answer).
    mine_only = [
        ("graph", await session.read("cortex://graph")),
        ("timeline", await session.read("cortex://timeline")),
        ("dossier", await session.read(f"cortex://entity/{quote(me)}")),
        ("memory", await session.read(f"cortex://memory/{my_id}")),
    ]
    prompt = await session.client.get_prompt("recall_context", {"task": f"{them} {their_place}"})
    text = prompt.messages[0].content.text if prompt.messages else ""
    # The task (which names them) closes the message; the memories come before it.
    mine_only.append(("prompt", text.rsplit("\nTask: ", 1)[0]))
    for what, value in mine_only:
        text = value if isinstance(value, str) else json.dumps(value)
        checks.check(
            them not in text and their_id not in text and their_place not in text,
            f"{label}: nothing of theirs in the {what} ({text})",
        )
        checks.check(me in text or my_id in text, f"{label}: their own {what} ({text})")


async def run(args: argparse.Namespace, checks: Checks) -> None:
    if args.mode == "isolation":
        await isolation(args, checks)
        return
    if args.mode == "stdio":
        env = {
            "CORTEX_DB_PATH": args.db,
            "CORTEX_EMBED_PROVIDER": "fake",
            "RUST_LOG": "warn",
            "PATH": os.environ.get("PATH", ""),
        }
        server: Any = StdioServerParameters(command=args.binary, args=[], env=env)
    else:
        server = http_server(args.url, args.token)
    async with connect(server, args.version) as client:
        await exercise(Session(client, checks), args.version)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["stdio", "http", "isolation"])
    parser.add_argument("--version", required=True, choices=[MODERN, LEGACY])
    parser.add_argument("--binary", help="the cortex-mcp binary (stdio)")
    parser.add_argument("--db", help="the server's CORTEX_DB_PATH (stdio)")
    parser.add_argument("--url", help="the server's /mcp URL (http, isolation)")
    parser.add_argument("--token", help="the server's bearer token (http)")
    parser.add_argument("--key-a", help="user A's API key (isolation)")
    parser.add_argument("--key-b", help="user B's API key (isolation)")
    args = parser.parse_args()

    checks = Checks(f"{args.mode} {args.version}")
    try:
        asyncio.run(asyncio.wait_for(run(args, checks), PHASE_TIMEOUT_SECS))
    except Exception as e:  # noqa: BLE001 - report any crash as a failed check
        checks.check(False, f"the client crashed: {type(e).__name__}: {e!r}")
    return checks.close(f"resources {checks.label}")


if __name__ == "__main__":
    sys.exit(main())
