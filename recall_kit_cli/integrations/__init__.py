"""Agent integrations on top of the CLI: the per-user recall daemon, Claude Code hooks, an MCP server.

The hook path imports only the standard library (it runs once per prompt); the daemon and the MCP
server import the engine when they start.
"""
