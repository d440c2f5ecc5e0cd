"""``python -m recall_kit.testing.llama_build``: install llama-cpp-python built for any CPU of this
machine's architecture, and the SmolLM2 model (``--help``; the work is ``recall_kit.testing.install_llama_cpp``)."""

from __future__ import annotations

import sys

from recall_kit.testing._llama_build import main

if __name__ == "__main__":
    sys.exit(main())
