"""Render a run folder's report.html to a PNG with headless Chromium, to look at the page without a browser.

    python scripts/render_report.py RUN_DIR OUT.png [--width 1400] [--height 4000] [--open-trees]

The report is written first when RUN_DIR has results.json but no report.html. Chromium is looked up as `chromium`,
`chromium-browser` or `google-chrome` on PATH (or /usr/bin/chromium); on Debian/Ubuntu: apt-get install -y chromium.
--open-trees renders a copy of the page with every task's <details> open (the report itself is left as it is).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str:
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    sys.exit("error: no Chromium found (looked for " + ", ".join(CANDIDATES) + " on PATH): install it, e.g. "
             "`apt-get install -y chromium`, then run this again")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=4000)
    parser.add_argument("--open-trees", action="store_true", help="render with every task's tree expanded")
    args = parser.parse_args()

    page = args.run_dir / "report.html"
    if not page.is_file():
        if not (args.run_dir / "results.json").is_file():
            sys.exit(f"error: {args.run_dir} holds neither report.html nor results.json: point at a bench run folder")
        from kernelskill.report import write_report

        write_report(args.run_dir)
    chromium = find_chromium()
    with tempfile.TemporaryDirectory(prefix="render-report-") as tmp:
        if args.open_trees:
            copy = Path(tmp) / "report.html"
            copy.write_text(page.read_text(encoding="utf-8").replace('<details class="task"',
                                                                     '<details open class="task"'), encoding="utf-8")
            page = copy
        out = args.out.resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={tmp}/profile", f"--screenshot={out}", f"--window-size={args.width},{args.height}",
               page.resolve().as_uri()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0 or not out.is_file():
        sys.exit(f"error: chromium exited with {proc.returncode} and wrote no screenshot:\n{proc.stderr[-2000:]}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
