"""The README stays a five-minute read, and the documentation site's home page is the README with its links
pointing inside the site."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def home_page(readme: str) -> str:
    """docs/index.md from README.md: links into docs/ become links within the site, and the README's own contents
    line is left out (the site shows the page's contents beside it)."""
    import re

    return re.sub(r"\*\*Contents:\*\*.*?\n\n", "", readme.replace("](docs/", "]("), count=1, flags=re.S)


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


# the commands in the order the CLI reference shows them; each group is followed by its own commands
REFERENCE_ORDER = ("", "optimize", "bench", "report", "review", "doctor", "memory", "cache", "corpus")


def cli_reference() -> str:
    """docs/reference/cli.md: every command's and group's `-h`, as printed at 80 columns."""
    import typer
    from typer.testing import CliRunner

    from kernelskill import __version__, cli

    if not any(group.name == "cache" for group in cli.app.registered_groups):
        cli._mount_optional()
        cli._mount_cache()
    root = typer.main.get_command(cli.app)
    paths: list[list[str]] = []
    for name in REFERENCE_ORDER:
        paths.append([name] if name else [])
        group = root.commands.get(name) if name else None
        paths += [[name, sub] for sub in getattr(group, "commands", {})]
    parts = [f"# Command-line reference\n\nEvery command prints this with `-h`; the text below is that output for "
             f"kernelskill {__version__} (`kernelskill --version`). Options are grouped; each example is a command "
             "you can paste.\n"]
    for path in paths:
        # 78: what Click formats on an 80-column terminal (it keeps 2 columns free)
        r = CliRunner().invoke(cli.app, [*path, "-h"], prog_name="kernelskill", terminal_width=78,
                               env={"COLUMNS": "80"})
        assert r.exit_code == 0, r.output
        parts.append(f"## {' '.join(['kernelskill', *path])}\n\n```text\n{r.output.rstrip()}\n```\n")
    return "\n".join(parts)


def test_the_cli_reference_is_the_help_itself():
    assert (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8") == cli_reference(), (
        "docs/reference/cli.md differs from the commands' -h: regenerate it with\n  PYTHONPATH=src python -c \"from "
        "tests.test_docs import cli_reference; from pathlib import Path; Path('docs/reference/cli.md')"
        ".write_text(cli_reference())\"")
