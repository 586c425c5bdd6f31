"""Which code of a reply is the candidate, when a reply holds more than one block (or none).

Real models restate: the whole file, then "the key change" as a `class ModelNew: ...` stub; a first draft, then
"corrected:" and the fixed file; the kernels in one block and ModelNew in the next; or the bare file with no fence.
Reviewing the stub costs a round on a kernel the model never meant. So a block is judged *complete* when it parses,
defines `class ModelNew` with a `forward` that does something (not only `...`, `pass` or `raise
NotImplementedError`), and uses no global name it does not define or import — a restated stub names kernels and
`nn` it does not import. Then, in this order:

1. the last complete block: where a reply holds two complete files, the later is the model's correction, so order
   decides and length never does (a fixed file is often shorter than its draft);
2. the blocks before the last one that defines ModelNew (those that define no ModelNew of their own) joined with
   it, when together they are complete (code split across blocks);
3. the longest block that defines ModelNew, the later on a tie: none is complete, and the Reviewer's error on the
   one with the most code is the most useful feedback (a syntax error is the candidate's compile failure).

A reply without any code fence is used whole only when it is complete by itself.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from collections.abc import Sequence

MODEL_NEW = re.compile(r"\bclass\s+ModelNew\b")
# module attributes every module has: using them is not a missing definition
_MODULE_NAMES = frozenset({"__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__",
                           "__builtins__", "__annotations__", "__dict__"})


def choose(bodies: Sequence[str]) -> str | None:
    """The candidate among closed code blocks (in reply order): complete, joined, or the longest defining one."""
    defining = [i for i, body in enumerate(bodies) if MODEL_NEW.search(body)]
    if not defining:
        return None
    complete = [i for i in defining if is_complete(bodies[i])]
    if complete:
        return bodies[complete[-1]]
    last = defining[-1]
    # helpers (kernels, imports) in blocks of their own, then the class: earlier drafts of ModelNew stay out
    parts = [bodies[i] for i in range(last) if i not in defining] + [bodies[last]]
    joined = "\n\n".join(body.strip("\n") for body in parts)
    if len(parts) > 1 and is_complete(joined):
        return joined
    longest = max(len(bodies[i]) for i in defining)
    return bodies[[i for i in defining if len(bodies[i]) == longest][-1]]


def is_complete(source: str) -> bool:
    """A whole candidate file: it parses, its ModelNew has a real forward, and every global name it uses is bound."""
    try:
        tree = ast.parse(source)
        table = symtable.symtable(source, "<candidate>", "exec")
    except (SyntaxError, ValueError):
        return False
    model_new = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    if model_new is None:
        return False
    forward = next((n for n in model_new.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if forward is None or _is_stub(forward.body):
        return False
    return not unbound_names(table)


def unbound_names(table: symtable.SymbolTable) -> set[str]:
    """Global names the module uses but neither defines nor imports (nor gets from builtins)."""
    module = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()
              or s.is_namespace()}
    if "*" in module:  # a star import may bind anything
        return set()
    known = module | set(dir(builtins)) | _MODULE_NAMES
    used: set[str] = set()
    pending = [table]
    while pending:
        t = pending.pop()
        for s in t.get_symbols():
            if s.is_referenced() and (s.is_global() or t.get_type() == "module"):
                used.add(s.get_name())
        pending.extend(t.get_children())
    return used - known


def _is_stub(body: list[ast.stmt]) -> bool:
    """A body with nothing in it: a docstring, `pass`, `...`, or `raise NotImplementedError`."""
    for stmt in body:
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):  # docstring or ...
            continue
        if isinstance(stmt, ast.Raise) and "NotImplementedError" in ast.unparse(stmt):
            continue
        return False
    return True
