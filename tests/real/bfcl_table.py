"""The "what to expect from small models" table: BFCL through the gateway against the real tier's models.

    python tests/real/bfcl_table.py [--limit N] [--categories a,b]   # what ``make bench-bfcl-real`` runs

Starts llama.cpp's ``llama-server --jinja`` for SmolLM2-135M (``chatml-tools.jinja``) and for Gemma 3
270M (``gemma3-tools.jinja``) from the tier's build (``tests/real/build.py``), one after the other,
runs ``bench/bench_bfcl.py --endpoint … --text-calls on,off`` against each at temperature 0, keeps
each JSON in ``.real/logs/bfcl-table-MODEL.json`` and prints the table (Markdown) on stdout:
per category, the share passed with the gateway's text-call parsing on and off.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.bfcl.data import CATEGORIES  # noqa: E402
from tests.real.servers import GEMMA_TEMPLATE, REAL, Build, llama_server, load_build  # noqa: E402

BOUNDS = ["--temperature", "0", "--max-output-tokens", "128", "--request-timeout", "300"]


def measure(build: Build, name: str, categories: list[str], limit: int) -> dict[str, Any]:
    logs = REAL / "logs" / "servers"
    model, template = (build.gemma, GEMMA_TEMPLATE) if name == "gemma" else (None, None)
    server_args: dict[str, Any] = {"model": model, "template": template} if model else {}
    with llama_server(build, logs, **server_args) as server:
        started = time.monotonic()
        argv = [
            sys.executable, str(ROOT / "bench" / "bench_bfcl.py"), "--endpoint", server.base_url,
            "--model", server.model_id, "--categories", ",".join(categories), "--limit", str(limit),
            "--text-calls", "on,off", *BOUNDS,
        ]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False)
        if done.returncode:
            raise SystemExit(f"bfcl_table: bench_bfcl.py failed for {name}:\n{done.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(done.stdout)
        result["wall_seconds"] = round(time.monotonic() - started, 1)
    (REAL / "logs" / f"bfcl-table-{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def table(results: dict[str, dict[str, Any]], categories: list[str]) -> str:
    names = list(results)
    head = "| category | " + " | ".join(f"{n} on | {n} off" for n in names) + " |"
    rule = "|---|" + "---|---|" * len(names)
    rows = [head, rule]

    def cell(row: dict[str, Any]) -> str:
        return "–" if row["passed"] is None else f"{row['passed'] * 100:.0f} % of {row['entries']}"

    for category in [*categories, "totals"]:
        picked = {
            n: results[n]["totals"] if category == "totals" else results[n]["categories"][category]
            for n in names
        }
        cells = [cell(picked[n][f"parsing_{s}"]) for n in names for s in ("on", "off")]
        rows.append(f"| {category} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--limit", type=int, default=5, help="the first N entries of each category (default 5)"
    )
    parser.add_argument("--categories", default=",".join(CATEGORIES), help="comma-separated (default: all)")
    parser.add_argument("--models", default="smollm2,gemma", help="smollm2, gemma or both (default)")
    args = parser.parse_args(argv)
    categories = [c for c in args.categories.split(",") if c]
    unknown = [c for c in categories if c not in CATEGORIES]
    if unknown:
        parser.error(f"--categories: unknown {', '.join(unknown)}; choose from {', '.join(CATEGORIES)}")
    models = [m for m in args.models.split(",") if m]
    if not models or set(models) - {"smollm2", "gemma"}:
        parser.error(f"--models: {args.models!r}; choose smollm2, gemma or both")
    build = load_build()
    results = {name: measure(build, name, categories, args.limit) for name in models}
    print(table(results, categories))
    return 0


if __name__ == "__main__":
    sys.exit(main())
