"""A tiny DOM for tests, built with the standard library's html.parser, that also checks the tags are balanced."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    children: list[Element | str] = field(default_factory=list)
    parent: Element | None = None

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self, tag: str | None = None):
        for child in self.children:
            if isinstance(child, Element):
                if tag is None or child.tag == tag:
                    yield child
                yield from child.iter(tag)

    def find_id(self, element_id: str) -> Element | None:
        return next((e for e in self.iter() if e.attrs.get("id") == element_id), None)

    def by_class(self, cls: str) -> list[Element]:
        return [e for e in self.iter() if cls in (e.attrs.get("class") or "").split()]

    def table_rows(self) -> list[list[str]]:
        """The rows of a <table> element as lists of cell texts (header rows included)."""
        return [[cell.text().strip() for cell in row.children if isinstance(cell, Element)]
                for row in self.iter("tr")]


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        element = Element(tag, dict(attrs), parent=self.stack[-1])
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag, attrs):  # <path ... /> inside the SVG plots
        self.stack[-1].children.append(Element(tag, dict(attrs), parent=self.stack[-1]))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if self.stack[-1].tag != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1].tag}> at line {self.getpos()[0]}")
            return
        self.stack.pop()

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse(text: str) -> Element:
    """Parse a page; fail the test when a tag is left open or closed out of order."""
    builder = _Builder()
    builder.feed(text)
    builder.close()
    assert not builder.errors, builder.errors[:5]
    assert [e.tag for e in builder.stack] == ["#document"], f"unclosed: {[e.tag for e in builder.stack[1:]]}"
    return builder.root
