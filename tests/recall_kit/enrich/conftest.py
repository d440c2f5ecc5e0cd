"""Puts enrich_support on the path for the enrichment tests (pytest runs in importlib mode)."""

from __future__ import annotations

import sys
from pathlib import Path

