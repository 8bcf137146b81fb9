"""A small MCP server made with the official Python SDK, for the confirmation tests: its one
tool `stamp` answers with the time the call arrived and how many calls came so far, so a test
can tell a call went out exactly once and how long after the client's retry. With STAMP_LOG
set, each call that arrives is also appended to that file as one JSON line, so a test can read
what reached this server without asking the server in front of it.

    STAMP_LOG=calls.jsonl python tests/python/stamp_server.py
"""

import json
import os
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("stamp")
calls = 0


@server.tool()
def stamp(note: str = "") -> dict:
    """The time this call arrived (seconds since the epoch) and the calls so far."""
    global calls
    calls += 1
    stamped = {"at": time.time(), "calls": calls, "note": note}
    if os.environ.get("STAMP_LOG"):
        with open(os.environ["STAMP_LOG"], "a") as f:
            f.write(json.dumps(stamped) + "\n")
    return stamped


if __name__ == "__main__":
    server.run()
