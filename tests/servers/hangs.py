"""Fixture: a "server" that never answers initialize and ignores the end of its stdin."""

from __future__ import annotations

import sys
import time

sys.stderr.write("hangs: waiting forever\n")
sys.stderr.flush()
sys.stdin.read()  # until stdin closes
while True:
    time.sleep(60)
