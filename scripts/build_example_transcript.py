"""Assemble the hand-written replies in examples/gelu_chain_replies/ into the replay transcript that the README's
first command uses. Run it after editing a reply; a test fails when the two disagree.

    python scripts/build_example_transcript.py [--check]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPLIES = ROOT / "examples" / "gelu_chain_replies"
TRANSCRIPT = ROOT / "examples" / "gelu_chain.transcript.jsonl"
NOTE = ("hand-written replies for the example, not produced by any model; sources in examples/gelu_chain_replies/, "
        "assembled by scripts/build_example_transcript.py")
_NAME = re.compile(r"^(\d+)-([a-z_]+)\.md$")


def build() -> str:
    entries = []
    for path in sorted(REPLIES.iterdir()):
        m = _NAME.match(path.name)
        if not m:
            continue
        entry = {"agent": m.group(2), "reply": path.read_text(encoding="utf-8"), "source": path.name}
        if not entries:
            entry = {"note": NOTE, **entry}
        entries.append(entry)
    return "".join(json.dumps(e) + "\n" for e in entries)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the transcript is out of date")
    args = parser.parse_args()
    text = build()
    if args.check:
        current = TRANSCRIPT.read_text(encoding="utf-8") if TRANSCRIPT.exists() else ""
        if current != text:
            print(f"{TRANSCRIPT} is out of date: run python scripts/build_example_transcript.py", file=sys.stderr)
            return 1
        return 0
    TRANSCRIPT.write_text(text, encoding="utf-8")
    print(f"wrote {TRANSCRIPT} ({text.count(chr(10))} replies)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
