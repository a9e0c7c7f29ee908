"""Fixture: exits with code 3 before any handshake, saying why on stderr."""

from __future__ import annotations

import sys

sys.stderr.write("exits_at_once: fatal: no configuration file\n")
sys.exit(3)
