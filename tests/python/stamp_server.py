"""A small MCP server made with the official Python SDK, for the confirmation tests: its one
tool `stamp` answers with the time the call arrived and how many calls came so far, so a test
can tell a call went out exactly once and how long after the client's retry.

    python tests/python/stamp_server.py
"""

import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("stamp")
calls = 0


@server.tool()
def stamp(note: str = "") -> dict:
    """The time this call arrived (seconds since the epoch) and the calls so far."""
    global calls
    calls += 1
    return {"at": time.time(), "calls": calls, "note": note}


if __name__ == "__main__":
    server.run()
