"""The README stays a five-minute read, and the documentation site's home page is the README with its links
pointing inside the site."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def home_page(readme: str) -> str:
    """docs/index.md from README.md: links into docs/ become links within the site."""
    return readme.replace("](docs/", "](")


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8")) < 10_000  # before: 42,000 characters


def test_the_home_page_is_the_readme():
    expected = home_page((ROOT / "README.md").read_text(encoding="utf-8"))
    assert (ROOT / "docs" / "index.md").read_text(encoding="utf-8") == expected, (
        "docs/index.md differs from README.md: regenerate it with\n  python -c \"from tests.test_docs import "
        "home_page; from pathlib import Path; Path('docs/index.md').write_text(home_page(Path('README.md')"
        ".read_text()))\"")


def test_readme_links_to_pages_that_exist():
    import re

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / target).is_file(), target
