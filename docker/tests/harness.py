"""What the Docker scenarios share: the compose project, checks that count, and MCP clients.

The scenarios (deployment.py, faults.py) run under scripts/test-docker.sh, which builds the
images, finds Compose v2 and the Python SDK's virtual environment, and passes them on in
the environment:

    CORTEX_COMPOSE          the Compose v2 command ("docker compose" or a binary's path)
    CORTEX_IMAGE            the server image (cortex-mcp:local)
    CORTEX_POSTGRES_IMAGE   the PostgreSQL + pgvector image (cortex-pgvector:local)
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import socket
import subprocess
import sys
import time
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import httpx2

ROOT = Path(__file__).resolve().parents[2]
# Checks are counted as the SDK's end-to-end scripts count them (mcp/tests/e2e/checks.py);
# deployment.py and faults.py take the class from here.
sys.path.insert(0, str(ROOT / "mcp" / "tests" / "e2e"))
from checks import Checks  # noqa: E402


def say(text: str) -> None:
    print(f"-- {text}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def docker(*args: str, check: bool = True) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=180)
    if check and done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


class Compose:
    """docker-compose.yml as users run it, on the local images, as project `name`."""

    def __init__(self, name: str, overrides: list[str] | None = None, **env: str) -> None:
        self.name = name
        self.port = free_port()
        self.command = shlex.split(os.environ.get("CORTEX_COMPOSE", "docker compose"))
        files = ["-f", str(ROOT / "docker-compose.yml")]
        for override in overrides or []:
            files += ["-f", str(ROOT / override)]
        self.base = [*self.command, "-p", name, "--project-directory", str(ROOT), *files]
        self.env = dict(
            os.environ,
            CORTEX_IMAGE=os.environ.get("CORTEX_IMAGE", "cortex-mcp:local"),
            CORTEX_POSTGRES_IMAGE=os.environ.get("CORTEX_POSTGRES_IMAGE", "cortex-pgvector:local"),
            CORTEX_PORT=str(self.port),
            **env,
        )
        self.url = f"http://127.0.0.1:{self.port}"

    def run(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run(
            [*self.base, *args], capture_output=True, text=True, env=self.env, timeout=timeout
        )
        if done.returncode != 0:
            raise RuntimeError(f"compose {' '.join(args)}: {done.stderr.strip()[-2000:]}")
        return done.stdout.strip()

    def up(self) -> float:
        """`up -d` on the local images, waiting for both services' health; seconds taken."""
        start = time.monotonic()
        self.run("up", "-d", "--no-build", "--pull", "never", "--wait", "--wait-timeout", "180")
        return time.monotonic() - start

    def down(self, volumes: bool = False) -> None:
        self.run("down", "--timeout", "45", *(["--volumes"] if volumes else []))

    def container(self, service: str) -> str:
        return self.run("ps", "-a", "-q", service)

    def network(self) -> str:
        return f"{self.name}_default"

    def token(self, user: str) -> str:
        """An API key for `user`, made as the README says: `cortex token create` in the container."""
        out = self.run("exec", "-T", "cortex", "cortex", "token", "create", "--user", user, "--json")
        return json.loads(out.splitlines()[-1])["token"]

    def wait_healthy(self, service: str, timeout: float = 180) -> float:
        start = time.monotonic()
        container = self.container(service)
        while time.monotonic() - start < timeout:
            state = docker("inspect", "-f", "{{.State.Health.Status}}", container, check=False)
            if state == "healthy":
                return time.monotonic() - start
            time.sleep(0.25)
        raise RuntimeError(f"{service} not healthy after {timeout} s")

    def logs(self, service: str, tail: int = 40) -> str:
        return self.run("logs", "--no-color", "--tail", str(tail), service)


class ToolFailed(Exception):
    """A tool call answered with isError, or a JSON-RPC error, or no answer at all."""


class SessionGone(Exception):
    """The server no longer knows the session (it restarted): open a new one, as MCP says."""


class RawMcp:
    """A minimal streamable-HTTP MCP client (JSON-RPC over POST, JSON or SSE answers) for the
    fault cases, where the server or its database goes away mid-call: every call is one
    request with its own timeout, a lost session is opened again with the same key, and
    nothing of a failure is left behind to break the next call."""

    def __init__(self, url: str, token: str, timeout: float = 90.0) -> None:
        self.url = f"{url}/mcp"
        self.token = token
        self.timeout = timeout
        self.session: str | None = None
        self.http = httpx2.AsyncClient(timeout=httpx2.Timeout(timeout))
        self.next_id = 0

    async def close(self) -> None:
        await self.http.aclose()

    def headers(self) -> dict[str, str]:
        h = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        if self.session:
            h["Mcp-Session-Id"] = self.session
        return h

    async def post(self, body: dict) -> dict | None:
        response = await self.http.post(self.url, json=body, headers=self.headers())
        if response.status_code == 404 and self.session:
            self.session = None
            raise SessionGone()
        if response.status_code >= 400:
            raise ToolFailed(f"HTTP {response.status_code}: {response.text[:200]}")
        if "id" not in body:
            return None
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            for line in response.text.splitlines():
                if line.startswith("data:") and line[5:].strip():
                    message = json.loads(line[5:])
                    if message.get("id") == body["id"]:
                        return message
            raise ToolFailed("no answer in the event stream")
        return response.json()

    async def open(self) -> None:
        self.session = None
        self.next_id += 1
        init = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "cortex-docker-faults", "version": "1"},
            },
        }
        response = await self.http.post(self.url, json=init, headers=self.headers())
        if response.status_code != 200:
            raise ToolFailed(f"initialize: HTTP {response.status_code}")
        self.session = response.headers.get("mcp-session-id")
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self, tool: str, arguments: dict) -> dict:
        """The tool's structured result; ToolFailed on any failure (the message says which)."""
        try:
            for attempt in range(2):
                if self.session is None:
                    await self.open()
                self.next_id += 1
                request = {
                    "jsonrpc": "2.0",
                    "id": self.next_id,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments},
                }
                try:
                    message = await self.post(request)
                    break
                except SessionGone:
                    if attempt == 1:
                        raise ToolFailed("session gone twice") from None
        except (httpx2.HTTPError, OSError, ValueError) as e:
            self.session = None
            raise ToolFailed(f"{type(e).__name__}: {e}") from e
        assert message is not None
        if "error" in message:
            raise ToolFailed(f"JSON-RPC error: {message['error']}")
        result = message["result"]
        if result.get("isError"):
            text = result["content"][0]["text"] if result.get("content") else ""
            raise ToolFailed(text)
        return result.get("structuredContent") or {}


@asynccontextmanager
async def sdk_session(url: str, token: str) -> AsyncIterator[Any]:
    """A session of the official Python SDK on /mcp, as a host would open it."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30.0, read=300.0),
    )
    async with http, streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


def structured(result: Any, what: str) -> dict:
    """A successful SDK tool result's structured content; raises with the message otherwise."""
    if result.is_error:
        text = result.content[0].text if result.content else ""
        raise ToolFailed(f"{what}: {text}")
    return result.structured_content or {}


def marker(user: str) -> str:
    """The tag every memory of `user` carries in its text, so any answer can be checked."""
    return f"[owner:{user}]"


def unique() -> str:
    return uuid.uuid4().hex[:8]


def main(run: Any) -> None:
    """Runs an async scenario and exits with its checks' status."""
    sys.exit(asyncio.run(run()))
