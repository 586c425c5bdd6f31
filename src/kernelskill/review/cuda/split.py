"""The CUDA source cut in two: its device code for nvcc without any torch header, its torch host code for g++ against
a precompiled header. Both nvcc front ends (cudafe++ and cicc) and the host compiler over cudafe++'s output each
parse ATen's headers once more for every candidate (about 5 s each on the H200 even with the core headers), although
the kernels never see them; a torch-free `.cu` builds in about a second. `split` is tried before every other variant
of the CUDA unit, and any failure of either part gives way to them (its errors are never the candidate's).

The cut is conservative: `split` returns None (no split) unless every top-level item of the source falls clearly on
one side. Preprocessor lines other than #include, #define, #undef and #pragma, raw strings, namespaces, `extern`
blocks, `static` or `extern` kernels (`extern "C"` ones are cut), variables that are not constants, any mention of nvcc's own macros, torch in
device code, and a `<<<` that is not a plain launch of one of the source's kernels all mean no split. A launch
`k<<<config>>>(args)` in host code becomes the expression nvcc itself writes for it,
`(__cudaPushCallConfiguration(config)) ? (void)0 : k(args)`, and the host part declares each kernel as nvcc's host
code does (the kernel's host stub, in the device part's object, has that name). A `__constant__` or `__device__`
variable that host code names (`cudaMemcpyToSymbol(coef, ...)`) reaches the host part as a reference to nvcc's host
shadow of it, whose address an accessor in the device part returns. Types, constants, macros and includes go to both
parts; each part keeps the source's line numbers (the other part's items become blank lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<number>\.?\d(?:[\w.]|'(?=\w))*)
  | (?P<punct><<<|>>>|::|->|.)
""", re.S | re.X)
_DIRECTIVE = re.compile(r"#(?:[^\n\\]|\\.|\\\n)*", re.S)  # to the end of the line, continuations included
_SYMBOL_SPACE = {"__constant__", "__device__"}  # variables host code may name (cudaMemcpyToSymbol)
_CUDA_SPACE = {"__global__", "__device__", "__constant__", "__shared__", "__managed__", "__grid_constant__"}
_TYPE_HEADS = {"struct", "class", "union", "enum", "typedef", "using", "static_assert"}
_NVCC_MACROS = re.compile(r"__CUDACC|__NVCC__|__CUDA_ARCH|__NVCOMPILER|__CUDA_API_VER")
_RAW_STRING = re.compile(r"(?<![\w])(?:u8|u|U|L)?R\"")
_ATTRIBUTE_GROUPS = ("__launch_bounds__", "__maxnreg__", "__cluster_dims__", "__attribute__", "__declspec",
                     "alignas")
_KERNEL_SPECIFIERS = re.compile(r"\b__global__\b|\b(?:__launch_bounds__|__maxnreg__|__cluster_dims__)\s*\(")
_OK_DIRECTIVE = re.compile(r"#\s*(include|define|undef|pragma)\b")
_EXTENSION_INCLUDE = re.compile(r"#\s*include\s*[<\"]torch/extension\.h[>\"]")
# torch or pybind11 (a PYBIND11_MODULE in the CUDA source): host code
USES_TORCH = re.compile(r"torch|\bat::|namespace\s+at\b|c10|ATen|TORCH_|\bAT_|\bC10_|pybind11|PYBIND11|\bpy::")

SYMBOL_ACCESSOR = "kernelskill_symbol_"
"""A device part's function that returns a variable's host shadow, for the host part (`cudaMemcpyToSymbol`)."""
SYMBOL_NAMESPACE = "kernelskill_symbols"


@dataclass
class _Token:
    kind: str
    text: str
    start: int
    end: int


@dataclass
class _Item:
    start: int
    end: int
    tokens: list[_Token]
    side: str = ""  # "device", "host", "both", "drop"
    kernel: str = ""  # a kernel's name (device items that define or declare a __global__ function)
    declaration: str = ""  # what the host part says of that kernel
    template: bool = False  # a kernel that is a template
    variable: str = ""  # a __constant__ or __device__ variable's name (device items that declare one)
    extern: str = ""  # its declaration without the memory space, static or initializer, for `extern`


@dataclass
class Split:
    device: str  # the device part's body (the caller prepends the CUDA headers)
    host: str  # the host part's body (compiled with the precompiled torch header forced in)
    kernels: list[str]
    launches: int
    templates: list[str]  # the kernels that are templates: the device part instantiates what the host part launches


class _NoSplit(Exception):
    pass


def _tokens(text: str) -> list[_Token]:
    out, pos, line_start = [], 0, True
    while pos < len(text):
        if line_start and text[pos] == "#":
            m = _DIRECTIVE.match(text, pos)
            out.append(_Token("directive", m.group(0), pos, m.end()))
            pos = m.end()
            continue
        m = _TOKEN.match(text, pos)
        kind = m.lastgroup
        if kind == "string" or kind == "comment" or kind == "space":
            if kind != "space":
                out.append(_Token(kind, m.group(0), pos, m.end()))
            if "\n" in m.group(0):
                line_start = True
            elif kind != "space" and kind != "comment":
                line_start = False
            pos = m.end()
            continue
        out.append(_Token(kind, m.group(0), pos, m.end()))
        line_start = False
        pos = m.end()
    return out


def _items(tokens: list[_Token]) -> list[_Item]:
    """Top-level items: a directive, a declaration to its `;`, a function definition to its `}`."""
    items: list[_Item] = []
    current: list[_Token] = []
    depth = 0
    for tok in tokens:
        if tok.kind == "comment":
            continue
        if tok.kind == "directive":
            if not _OK_DIRECTIVE.match(tok.text):
                raise _NoSplit(f"preprocessor line {tok.text.split()[0]}")
            if depth == 0:
                if current:
                    raise _NoSplit("a directive inside a declaration")
                items.append(_Item(tok.start, tok.end, [tok]))
            continue
        current.append(tok)
        if tok.text in "({[" and tok.kind == "punct":
            depth += 1
        elif tok.text in ")}]" and tok.kind == "punct":
            depth -= 1
            if depth < 0:
                raise _NoSplit("unbalanced brackets")
            if tok.text == "}" and depth == 0 and not _continues(current):
                items.append(_Item(current[0].start, tok.end, current))
                current = []
        elif tok.text == ";" and depth == 0:
            items.append(_Item(current[0].start, tok.end, current))
            current = []
    if current or depth:
        raise _NoSplit("the source ends inside a declaration")
    return items


def _head(item: _Item) -> list[_Token]:
    """The item's tokens before its first top-level `{` (all of them for a declaration)."""
    depth = 0
    for i, tok in enumerate(item.tokens):
        if tok.kind == "punct" and tok.text == "{" and depth == 0:
            return item.tokens[:i]
        if tok.kind == "punct" and tok.text in "([":
            depth += 1
        elif tok.kind == "punct" and tok.text in ")]":
            depth -= 1
    return item.tokens


def _continues(current: list[_Token]) -> bool:
    """Whether a top-level `}` leaves the item open (a type's body or an initializer, ended by `;`)."""
    words = _top(_head(_Item(0, 0, current)))
    if "namespace" in words or (len(words) == 2 and words[0] == "extern" and words[1].startswith('"')):
        raise _NoSplit("a namespace or extern block")
    if words[:1] == ["template"]:  # (its default arguments are no initializer)
        words = words[_template_end(words):]
    if "=" in words:
        return True
    return bool(words) and words[0] in _TYPE_HEADS


def _top(tokens: list[_Token]) -> list[str]:
    """The texts of the tokens outside any bracket."""
    out, depth = [], 0
    for tok in tokens:
        if tok.kind == "punct" and tok.text in "([{":
            depth += 1
        elif tok.kind == "punct" and tok.text in ")]}":
            depth -= 1
        elif depth == 0:
            out.append(tok.text)
    return out


def _template_end(words: list[str]) -> int:
    depth = 0
    for i, w in enumerate(words):
        if w == "<":
            depth += 1
        elif w == ">":
            depth -= 1
            if depth == 0:
                return i + 1
        elif w == ">>":
            depth -= 2
            if depth <= 0:
                return i + 1
    raise _NoSplit("a template header that does not close")


def _is_function_definition(item: _Item) -> bool:
    head = _head(item)
    return len(head) < len(item.tokens) and item.tokens[-1].text == "}" and any(t.text == "(" for t in head)


def _kernel_name(head: list[_Token]) -> str:
    """The name before the parameter list, skipping __launch_bounds__(...) and attribute groups."""
    i = 0
    while i < len(head):
        tok = head[i]
        if tok.kind == "ident" and tok.text in _ATTRIBUTE_GROUPS:
            i = _skip_group(head, i + 1)
            continue
        if tok.text == "(":
            before = head[i - 1] if i else None
            if before is None or before.kind != "ident" or (i >= 2 and head[i - 2].text in ("::", ".", "->")):
                raise _NoSplit("a kernel whose name this does not read")
            return before.text
        i += 1
    raise _NoSplit("a kernel without a parameter list")


def _skip_group(tokens: list[_Token], i: int) -> int:
    """The index after the bracketed group starting at tokens[i] (which must be `(`)."""
    if i >= len(tokens) or tokens[i].text != "(":
        return i
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j].text == "(":
            depth += 1
        elif tokens[j].text == ")":
            depth -= 1
            if depth == 0:
                return j + 1
    raise _NoSplit("unbalanced brackets")


def _classify(item: _Item, text: str) -> None:
    words = {t.text for t in item.tokens if t.kind == "ident"}
    body = text[item.start:item.end]
    if item.tokens[0].kind == "directive":  # a macro that names torch is for the host side (CHECK_INPUT & co.)
        item.side = "drop" if _EXTENSION_INCLUDE.match(body) else "host" if USES_TORCH.search(body) else "both"
        return
    if words & _CUDA_SPACE:
        if USES_TORCH.search(body):
            raise _NoSplit("device code that uses torch")
        item.side = "device"
        if "__global__" in words:
            head = _head(item)
            item.template = head[0].text == "template"
            start = _template_end([t.text for t in head]) if item.template else 0
            c_linkage = [t.text for t in head[:2]] == ["extern", '"C"']  # its stub has the kernel's C name
            if any(t.text in ("static", "inline") for t in head) or (head[0].text == "extern" and not c_linkage):
                raise _NoSplit("a static, inline or extern kernel")
            item.kernel = _kernel_name(head[start:])
            end = head[-1].end if len(head) < len(item.tokens) else item.tokens[-1].start
            signature = text[item.start:end]
            item.declaration = _without_kernel_specifiers(signature).rstrip() + ";"
        elif words & _SYMBOL_SPACE and not words & {"__shared__", "__managed__"} and item.tokens[0].text != "template":
            item.variable, item.extern = _variable(item)
        return
    if _is_function_definition(item):
        item.side = "host"
        return
    first = item.tokens[0].text
    words_in_order = [t.text for t in item.tokens]
    top = _top(item.tokens)
    if USES_TORCH.search(body):
        item.side = "host"
    elif first == "template":
        rest = words_in_order[_template_end(words_in_order):]
        if rest and rest[0] in ("struct", "class", "union", "using"):
            item.side = "both"
        else:
            raise _NoSplit("a template declaration this does not place")
    elif first in _TYPE_HEADS or "constexpr" in words or ("const" in top and "=" in top):
        item.side = "both"
    elif words_in_order[-2:] == [")", ";"] and "=" not in top:
        item.side = "both"  # a function's declaration
    else:
        raise _NoSplit(f"a top-level declaration this does not place: {body[:60]!r}")


def _variable(item: _Item) -> tuple[str, str]:
    """(name, declaration for `extern`) of a device item that declares one variable; ("", "") for a function, an
    attributed declaration (`__align__(16)`) or several declarators."""
    depth, name, stop = 0, None, None
    for i, tok in enumerate(item.tokens):
        if depth == 0 and (tok.text in ("=", ";") or (tok.text == "{" and name is not None)):
            stop = i  # the initializer, a brace initializer or the end
            break
        if tok.kind == "punct" and tok.text in "([{":
            if depth == 0 and tok.text in "({":
                return "", ""
            depth += 1
        elif tok.kind == "punct" and tok.text in ")]}":
            depth -= 1
        elif depth == 0 and tok.text == ",":
            return "", ""
        elif depth == 0 and tok.kind == "ident":
            name = tok.text
    if name is None or stop is None:
        return "", ""
    kept = [t.text for t in item.tokens[:stop] if t.text not in _SYMBOL_SPACE and t.text not in ("static", "extern")]
    return name, " ".join(kept)


def _without_kernel_specifiers(signature: str) -> str:
    out, pos = [], 0
    for m in _KERNEL_SPECIFIERS.finditer(signature):
        out.append(signature[pos:m.start()])
        pos = m.end()
        if m.group(0).endswith("("):
            depth = 1
            while pos < len(signature) and depth:
                depth += {"(": 1, ")": -1}.get(signature[pos], 0)
                pos += 1
    out.append(signature[pos:])
    return "".join(out)


def _rewrite_launches(item: _Item, text: str, kernels: set[str]) -> tuple[str, int]:
    """The host item's text with each `k<<<config>>>(args)` written as nvcc's launch expression."""
    toks = item.tokens
    out, pos, count = [], item.start, 0
    i = 0
    while i < len(toks):
        tok = toks[i]
        if tok.text == ">>>":
            raise _NoSplit("a `>>>` outside a launch")
        if tok.text != "<<<":
            i += 1
            continue
        first = _launched(toks, i)  # the kernel's name, or a template's name and its arguments
        name = toks[first] if first is not None else None
        if (name is None or name.kind != "ident" or name.text not in kernels
                or (first >= 1 and toks[first - 1].text in ("::", ".", "->", ">"))):
            raise _NoSplit("a launch of something other than one of the source's kernels")
        j, depth = i + 1, 0
        while j < len(toks) and not (toks[j].text == ">>>" and depth == 0):
            if toks[j].text == "<<<":
                raise _NoSplit("a launch inside a launch's configuration")
            depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(toks[j].text, 0)
            j += 1
        if j + 1 >= len(toks) or toks[j + 1].text != "(":
            raise _NoSplit("a launch without arguments")
        close = _skip_group(toks, j + 1) - 1
        config = text[tok.end:toks[j].start]
        args = text[toks[j + 1].end:toks[close].start]
        out.append(text[pos:name.start])
        out.append(f"((__cudaPushCallConfiguration({config})) ? (void)0 : {text[name.start:toks[i - 1].end]}({args}))")
        pos = toks[close].end
        count += 1
        i = close + 1
    out.append(text[pos:item.end])
    return "".join(out), count


def _launched(toks: list[_Token], i: int) -> int | None:
    """The index of the launched name before the `<<<` at toks[i]: the token before it, or before the template
    argument list that ends there (`k<scalar_t, 4><<<...`)."""
    j = i - 1
    if j >= 0 and toks[j].text == ">":
        depth = 0
        while j >= 0:
            depth += {">": 1, "<": -1}.get(toks[j].text, 0)
            if depth == 0:
                break
            j -= 1
        j -= 1
    return j if j >= 0 else None


def _blank(piece: str) -> str:
    return "\n" * piece.count("\n")


def split(text: str) -> Split | None:
    """The two parts of a CUDA source, or None when the cut is not clear (see the module's docstring)."""
    try:
        return _split(text)
    except _NoSplit:
        return None


def why_not(text: str) -> str | None:
    """Why `split` declines this source (None when it splits it): for notes and tests."""
    try:
        _split(text)
    except _NoSplit as exc:
        return str(exc)
    return None


def _split(text: str) -> Split:
    if _RAW_STRING.search(text):
        raise _NoSplit("a raw string literal")
    if _NVCC_MACROS.search(text):
        raise _NoSplit("a mention of nvcc's own macros")
    items = _items(_tokens(text))
    for item in items:
        _classify(item, text)
    kernels = {item.kernel for item in items if item.kernel}
    if not any(item.side == "host" for item in items):
        raise _NoSplit("no host code")
    named_by_host = {t.text for item in items if item.side == "host" for t in item.tokens if t.kind == "ident"}
    device, host, pos, launches = [], [], 0, 0
    for item in items:
        gap = text[pos:item.start]
        device.append(gap)
        host.append(gap)
        piece = text[item.start:item.end]
        if item.side == "both":
            device.append(piece)
            host.append(piece)
        elif item.side == "device" and item.variable in named_by_host:
            # the host part cannot name the variable (nvcc keeps its host shadow, the address cudaMemcpyToSymbol takes,
            # to the device part's object): the device part hands out the shadow's address, the host part binds a
            # reference of the variable's type and name to it, all on the declaration's own line
            accessor = f"{SYMBOL_ACCESSOR}{item.variable}"
            device.append(f"{piece} void* {accessor}() {{ return (void*)&{item.variable}; }}")
            declared = f"{SYMBOL_NAMESPACE}::{item.variable}"
            host.append(f"namespace {SYMBOL_NAMESPACE} {{ extern {item.extern}; }} void* {accessor}(); "
                        f"static decltype({declared})& {item.variable} = "
                        f"*static_cast<decltype({declared})*>({accessor}());" + _blank(piece))
        elif item.side == "device":
            device.append(piece)
            # (the declaration is the definition's head: the newlines in it are the piece's first ones)
            host.append(item.declaration + "\n" * (piece.count("\n") - item.declaration.count("\n")) if item.kernel
                        else _blank(piece))
        elif item.side == "host":
            rewritten, n = _rewrite_launches(item, text, kernels)
            launches += n
            device.append(_blank(piece))
            host.append(rewritten)
        else:  # the include of <torch/extension.h>: the host part has the precompiled header, the device part none
            device.append(_blank(piece))
            host.append(_blank(piece))
        pos = item.end
    device.append(text[pos:])
    host.append(text[pos:])
    # (torch cannot reach the device part: items that mention it go to the host part or stop the cut, and a host
    # macro used in device code leaves a name nvcc does not know, an error that gives way to the unsplit variants)
    return Split("".join(device), "".join(host), sorted(kernels), launches,
                 sorted(item.kernel for item in items if item.template))
