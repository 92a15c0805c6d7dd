"""connect chatgpt | claude | server (enrollment client) | mcp."""
