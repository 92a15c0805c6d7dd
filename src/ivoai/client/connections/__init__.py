"""connect chatgpt | claude | server (enrollment client) | mcp, and the connection registry."""
