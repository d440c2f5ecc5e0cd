"""Fixtures for the integration tests; the helpers live in integration_support."""

from __future__ import annotations

import sys
from pathlib import Path


from integration_support import daemon, env, memories  # noqa: F401
