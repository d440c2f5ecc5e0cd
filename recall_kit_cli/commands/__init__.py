"""One module per command; `recall_kit_cli._app` adds each to the group."""
