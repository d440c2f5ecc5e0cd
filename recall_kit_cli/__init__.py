"""The `recall-kit` command line (installed as the `recall_kit_cli` package)."""
