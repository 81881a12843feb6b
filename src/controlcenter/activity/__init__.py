"""The ledger of the assistant's writes to the CRM and to MCP servers, and their undo."""
