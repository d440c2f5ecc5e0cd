"""`python -m recall_kit_cli ...`: how the hook starts the daemon with the same interpreter."""

from recall_kit_cli.main import main

main()
