"""Chain tests are pure: no database, no server. Make `src/` importable when not installed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("chainkeys") is None:  # pragma: no cover - depends on the install
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
