"""Repair tests reuse the language-server test helpers (tests/server) for the editor end-to-end test."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
