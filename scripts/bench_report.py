"""Size and generation time of the HTML pages: report.html of a run and compare.html.

    python scripts/bench_report.py [--demo build/demo/runs/demo] [--repeats 5] [--screenshots docs/] [--json out.json]

Measures, in this process after the imports (median of --repeats):
- report.html of the demo run (its report.json as evaluate.py wrote it), when the folder exists;
- report.html of a synthetic release-size run: 19 tasks x 5 protocols x 3 models, 52 dependency points
  (asyncodebench.reports.synthetic: seeded, metrics computed from generated traces; nothing real);
- dependency_resolution.png of the same two runs;
- compare.html of two synthetic release-size runs (every view, 10,000 bootstrap resamples per comparison and metric).

--screenshots DIR also saves one screen of each page as PNG through headless Chromium (/usr/bin/chromium), for
docs/pages.md: the top of the demo run's page at 1280 px and at a phone's 390 px, the synthetic run's dependency
timelines, the comparison's protocol view.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def timed(repeats: int, work: Callable[[], Path]) -> dict[str, Any]:
    """Median, min and max seconds of `work` and the size of the file it writes."""
    seconds, path = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        path = work()
        seconds.append(time.perf_counter() - start)
    return {"median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds),
            "repeats": repeats, "bytes": path.stat().st_size, "path": str(path)}


def measure(demo: Path | None, repeats: int, out: Path) -> dict[str, dict[str, Any]]:
    # Here, not at the top: --help answers without loading the reports (and jsonschema).
    from asyncodebench.reports.compare import Run, compare_runs
    from asyncodebench.reports.htmlcompare import render_compare
    from asyncodebench.reports.htmlreport import write_report_html
    from asyncodebench.reports.plots import plot_resolution
    from asyncodebench.reports.synthetic import synthetic_report

    rows: dict[str, dict[str, Any]] = {}
    if demo is not None:
        report = json.loads((demo / "report.json").read_text())
        label = f"demo run ({len(report['predictions'])} predictions)"
        rows[f"report.html, {label}"] = timed(repeats, lambda: write_report_html(report, out / "demo.html", demo))
        rows[f"PNG, {label}"] = timed(repeats, lambda: plot_resolution(report["predictions"], out / "demo.png"))
    synthetic = synthetic_report()
    label = f"synthetic 19x5x3 ({len(synthetic['predictions'])} predictions)"
    rows[f"report.html, {label}"] = timed(repeats, lambda: write_report_html(synthetic, out / "synthetic.html"))
    rows[f"PNG, {label}"] = timed(repeats, lambda: plot_resolution(synthetic["predictions"], out / "synthetic.png"))
    runs = [Run(f"synthetic-{seed}", f"synthetic-{seed}/report.json", synthetic_report(seed=seed,
                                                                                     run_id=f"synthetic-{seed}"))
            for seed in (0, 1)]

    def compare_page() -> Path:
        record = compare_runs(runs)
        (out / "compare.html").write_text(render_compare(record))
        rows.setdefault("_compare", {"comparisons": len(record["comparisons"])})
        return out / "compare.html"

    rows["compare.html, two synthetic 19x5x3 runs"] = timed(repeats, compare_page)
    comparisons = rows.pop("_compare")["comparisons"]
    rows["compare.html, two synthetic 19x5x3 runs"]["comparisons"] = comparisons
    return rows


def screenshots(pages: dict[str, tuple[Path, str, tuple[int, int]]], folder: Path) -> None:
    """One screen of each page at its viewport (1280 x 760, or a phone's 390 x 844), scrolled to the given anchor
    (the first task's timelines unfolded), as a small palette PNG."""
    from PIL import Image  # pillow comes with matplotlib
    from playwright.sync_api import sync_playwright

    folder.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for name, (path, anchor, (width, height)) in pages.items():
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(path.resolve().as_uri() + anchor)
            page.evaluate("document.querySelectorAll('details.task').forEach((d, i) => { d.open = i === 0; })")
            page.screenshot(path=str(folder / name))
            Image.open(folder / name).convert("RGB").quantize(colors=128).save(folder / name, optimize=True)
            print(f"screenshot: {folder / name}", file=sys.stderr)
            page.close()
        browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_demo = Path("build/demo/runs/demo")
    parser.add_argument("--demo", type=Path, default=default_demo if (default_demo / "report.json").exists() else None,
                        help="a run folder to measure (default: the demo's, when scripts/run_demo.sh made it)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--screenshots", type=Path, default=None, help="save a PNG of each page's first screen here")
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        rows = measure(args.demo, args.repeats, out)
        print("| page | median (s) | min (s) | max (s) | size (KiB) |\n|---|---:|---:|---:|---:|")
        for name, row in rows.items():
            print(f"| {name} | {row['median_s']:.2f} | {row['min_s']:.2f} | {row['max_s']:.2f} | "
                  f"{row['bytes'] / 1024:.0f} |")
        if args.screenshots:
            wide, phone = (1280, 760), (390, 844)
            pages = {"report-synthetic-timelines.png": (out / "synthetic.html", "#dependencies", wide),
                     "compare-synthetic.png": (out / "compare.html", "#protocols", wide)}
            if args.demo is not None:
                pages = {"report-demo.png": (out / "demo.html", "", wide),
                         "report-demo-390.png": (out / "demo.html", "", phone), **pages}
            screenshots(pages, args.screenshots)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
