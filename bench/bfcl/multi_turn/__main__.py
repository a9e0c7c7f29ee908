"""``python -m bench.bfcl.multi_turn [--categories A,B] [--limit N] [--ids ID,...]``: replay BFCL's
multi-turn ground truth through ``agent_query`` sessions and print ONE JSON object (progress on
stderr)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench.bfcl.multi_turn.data import CATEGORIES
from bench.bfcl.multi_turn.replay import run_multi_turn


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="BFCL multi-turn ground truth through agent_query sessions")
    parser.add_argument(
        "--categories", default=",".join(CATEGORIES), help="comma-separated (default: all four)"
    )
    parser.add_argument("--limit", type=int, help="the first N entries of each category")
    parser.add_argument("--ids", default="", help="only these entry ids, comma-separated")
    args = parser.parse_args(argv)
    categories = [name.strip() for name in args.categories.split(",") if name.strip()]
    unknown = [name for name in categories if name not in CATEGORIES]
    if unknown or not categories:
        parser.error(
            f"--categories: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(CATEGORIES)}"
        )
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be at least 1, not {args.limit}")
    ids = [name.strip() for name in args.ids.split(",") if name.strip()]
    print(json.dumps(run_multi_turn(categories, args.limit, ids=ids), indent=2))


if __name__ == "__main__":
    main()
