"""A small, safe expression language for the knowledge base.

Predicates, derived fields, rules and decision cases are written as short expressions such as
``dram_throughput_pct >= 70 and not uses_tensor_cores``. They are parsed with Python's `ast` and only a whitelist of
node types is accepted (comparisons, and/or/not, + - * /, numbers, strings, names and a few functions); nothing is
ever handed to `eval`, so a knowledge-base file cannot run code.

Evidence is often incomplete (ncu not permitted, a metric renamed, no candidate source), so evaluation is
three-valued: a missing input gives `Unknown`, which spreads through arithmetic and comparisons and follows Kleene
logic through and/or/not (``False and unknown`` is False, ``True and unknown`` is unknown). An unknown is never read
as false; the caller reports it.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass

MAX_SOURCE_CHARS = 1000
MAX_NODES = 300
MAX_STRING_CHARS = 100

FUNCTIONS = ("min", "max", "abs", "known", "first_known")


class ExprError(ValueError):
    """An expression that is not allowed or not well formed (raised when it is compiled)."""


class ExprTypeError(ValueError):
    """An expression applied to values of the wrong kind (raised when it is evaluated)."""


class Unknown:
    """A value that cannot be computed: `missing` names absent evidence, `undefined` says why else (e.g. x / 0)."""

    __slots__ = ("missing", "undefined")

    def __init__(self, missing: frozenset[str] | set[str] = frozenset(), undefined: tuple[str, ...] = ()) -> None:
        self.missing = frozenset(missing)
        self.undefined = tuple(dict.fromkeys(undefined))

    def __bool__(self) -> bool:
        # An unknown must be handled explicitly; silently treating it as False is the bug this type exists to stop.
        raise TypeError("an unknown value has no truth value")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unknown) and (self.missing, self.undefined) == (other.missing, other.undefined)

    def __hash__(self) -> int:
        return hash((self.missing, self.undefined))

    def __repr__(self) -> str:
        parts = sorted(self.missing) + list(self.undefined)
        return f"unknown({', '.join(parts)})"


Value = bool | int | float | str | Unknown


def merge_unknown(*values: object) -> Unknown:
    """One Unknown that carries the causes of every unknown among `values`."""
    missing: set[str] = set()
    undefined: list[str] = []
    for v in values:
        if isinstance(v, Unknown):
            missing |= v.missing
            undefined.extend(v.undefined)
    return Unknown(missing, tuple(undefined))


_BOOL_OPS = {ast.And, ast.Or}
_UNARY_OPS = {ast.Not, ast.USub, ast.UAdd}
_BIN_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_CMP_OPS = {ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq, ast.In, ast.NotIn}
_ALLOWED_NODES = (
    ast.Expression, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.Compare, ast.Name, ast.Load, ast.Constant,
    ast.Call, ast.Tuple, *_BOOL_OPS, *_UNARY_OPS, *_BIN_OPS, *_CMP_OPS,
)  # fmt: skip


@dataclass(frozen=True)
class Expr:
    """A checked expression: its source text, its parse tree and the names it reads."""

    source: str
    tree: ast.Expression
    names: frozenset[str]
    string_comparisons: tuple[tuple[str, str], ...]  # (name, "literal") pairs, so enum values can be checked

    def evaluate(self, env: Mapping[str, Value]) -> Value:
        """Evaluate against `env` (name -> value or Unknown). Raises ExprTypeError on ill-typed operands."""
        return _Evaluator(env, self.source).visit(self.tree.body)


def compile_expr(source: str) -> Expr:
    """Parse and check `source`; raise ExprError naming the first construct that is not allowed."""
    if not isinstance(source, str) or not source.strip():
        raise ExprError("the expression is empty")
    if len(source) > MAX_SOURCE_CHARS:
        raise ExprError(f"the expression is longer than {MAX_SOURCE_CHARS} characters")
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"syntax error at column {exc.offset}: {exc.msg}") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise ExprError(f"the expression has more than {MAX_NODES} parts; split it into named predicates")
    names: set[str] = set()
    pairs: list[tuple[str, str]] = []
    membership_tuples = {id(c) for n in nodes if isinstance(n, ast.Compare) for c in n.comparators}
    for node in nodes:
        _check_node(node)
        if isinstance(node, ast.Tuple) and id(node) not in membership_tuples:
            raise ExprError("a tuple is only allowed on the right of 'in' / 'not in'")
        if isinstance(node, ast.Name) and not _is_function_position(node, tree):
            names.add(node.id)
        if isinstance(node, ast.Compare):
            pairs.extend(_string_pairs(node))
    return Expr(source.strip(), tree, frozenset(names), tuple(pairs))


def _check_node(node: ast.AST) -> None:
    if not isinstance(node, _ALLOWED_NODES):
        raise ExprError(f"{_describe(node)} is not allowed (only comparisons, and/or/not, + - * /, "
                        f"numbers, strings, names and {', '.join(FUNCTIONS)})")  # fmt: skip
    if isinstance(node, ast.Name):
        if node.id.startswith("_"):
            raise ExprError(f"the name {node.id!r} is not allowed (names may not start with '_')")
    elif isinstance(node, ast.Constant):
        if isinstance(node.value, bool | int | float):
            if isinstance(node.value, float) and not math.isfinite(node.value):
                raise ExprError("non-finite numbers are not allowed")
        elif isinstance(node.value, str):
            if len(node.value) > MAX_STRING_CHARS:
                raise ExprError(f"string literals are limited to {MAX_STRING_CHARS} characters")
        else:
            raise ExprError(f"the constant {node.value!r} is not allowed")
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            called = node.func.id if isinstance(node.func, ast.Name) else _describe(node.func)
            raise ExprError(f"calling {called} is not allowed (allowed functions: {', '.join(FUNCTIONS)})")
        if node.keywords:
            raise ExprError(f"{node.func.id}() takes no keyword arguments")
        if not node.args:
            raise ExprError(f"{node.func.id}() needs at least one argument")
        if node.func.id in ("abs", "known") and len(node.args) != 1:
            raise ExprError(f"{node.func.id}() takes exactly one argument")
    elif isinstance(node, ast.Compare):
        for op, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, ast.In | ast.NotIn) and not (
                isinstance(right, ast.Tuple) and all(isinstance(e, ast.Constant) for e in right.elts)
            ):
                raise ExprError("'in' needs a literal tuple on its right, e.g. tier in (\"H\", \"M\")")


def _is_function_position(name: ast.Name, tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and n.func is name for n in ast.walk(tree))


def _string_pairs(node: ast.Compare) -> list[tuple[str, str]]:
    operands = [node.left, *node.comparators]
    out: list[tuple[str, str]] = []
    for left, right in zip(operands, operands[1:], strict=False):
        for a, b in ((left, right), (right, left)):
            if isinstance(a, ast.Name):
                consts = b.elts if isinstance(b, ast.Tuple) else [b]
                out += [(a.id, c.value) for c in consts if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return out


def _describe(node: ast.AST) -> str:
    labels = {
        ast.Attribute: "attribute access", ast.Subscript: "subscripting", ast.Lambda: "lambda",
        ast.ListComp: "a comprehension", ast.SetComp: "a comprehension", ast.DictComp: "a comprehension",
        ast.GeneratorExp: "a generator", ast.JoinedStr: "an f-string", ast.NamedExpr: "assignment (:=)",
        ast.Starred: "unpacking (*)", ast.IfExp: "a conditional expression", ast.Pow: "the ** operator",
        ast.List: "a list", ast.Dict: "a dict", ast.Set: "a set", ast.Await: "await",
    }  # fmt: skip
    return labels.get(type(node), f"the construct '{type(node).__name__}'")


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


class _Evaluator:
    def __init__(self, env: Mapping[str, Value], source: str) -> None:
        self.env = env
        self.source = source

    def fail(self, message: str) -> ExprTypeError:
        return ExprTypeError(f"in {self.source!r}: {message}")

    def visit(self, node: ast.AST) -> Value:
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:  # compile_expr rejects these; this guards an Expr built by hand
            raise self.fail(f"{_describe(node)} is not allowed")
        return method(node)

    def visit_Constant(self, node: ast.Constant) -> Value:
        return node.value

    def visit_Name(self, node: ast.Name) -> Value:
        if node.id not in self.env:
            raise self.fail(f"the name {node.id!r} is not defined")
        return self.env[node.id]

    def truth(self, node: ast.AST) -> bool | Unknown:
        v = self.visit(node)
        if isinstance(v, Unknown) or isinstance(v, bool):
            return v
        raise self.fail(f"{ast.unparse(node)!r} is {v!r}, not true/false; compare it explicitly")

    def visit_BoolOp(self, node: ast.BoolOp) -> Value:
        # Kleene logic: a decisive operand (False for and, True for or) wins even when others are unknown.
        decisive = isinstance(node.op, ast.Or)
        unknowns: list[Unknown] = []
        for operand in node.values:
            v = self.truth(operand)
            if isinstance(v, Unknown):
                unknowns.append(v)
            elif v is decisive:
                return decisive
        return merge_unknown(*unknowns) if unknowns else (not decisive)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Value:
        if isinstance(node.op, ast.Not):
            v = self.truth(node.operand)
            return v if isinstance(v, Unknown) else (not v)
        v = self.visit(node.operand)
        if isinstance(v, Unknown):
            return v
        if not _is_number(v):
            raise self.fail(f"unary minus/plus needs a number, got {v!r}")
        return -v if isinstance(node.op, ast.USub) else +v

    def visit_BinOp(self, node: ast.BinOp) -> Value:
        a, b = self.visit(node.left), self.visit(node.right)
        if isinstance(a, Unknown) or isinstance(b, Unknown):
            return merge_unknown(a, b)
        if not (_is_number(a) and _is_number(b)):
            raise self.fail(f"arithmetic needs numbers, got {a!r} {_BIN_OPS[type(node.op)]} {b!r}")
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if b == 0:
            return Unknown(undefined=(f"{ast.unparse(node)} divides by zero",))
        return a / b

    def visit_Compare(self, node: ast.Compare) -> Value:
        # a < b < c means (a < b) and (b < c); each link is three-valued.
        results: list[bool | Unknown] = []
        left = self.visit(node.left)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.visit(right_node)
            results.append(self.compare(op, left, right))
            left = right
        if any(r is False for r in results):
            return False
        unknowns = [r for r in results if isinstance(r, Unknown)]
        return merge_unknown(*unknowns) if unknowns else True

    def compare(self, op: ast.cmpop, a: Value, b: Value) -> bool | Unknown:
        if isinstance(op, ast.In | ast.NotIn):
            if isinstance(a, Unknown):
                return a
            inside = a in b  # b is a literal tuple (checked at compile time)
            return inside if isinstance(op, ast.In) else not inside
        if isinstance(a, Unknown) or isinstance(b, Unknown):
            return merge_unknown(a, b)
        if isinstance(op, ast.Eq | ast.NotEq):
            if _is_number(a) != _is_number(b) or (not _is_number(a) and type(a) is not type(b)):
                raise self.fail(f"cannot compare {a!r} with {b!r} (different kinds)")
            return (a == b) if isinstance(op, ast.Eq) else (a != b)
        if not (_is_number(a) and _is_number(b)):
            raise self.fail(f"ordering needs numbers, got {a!r} and {b!r}")
        if isinstance(op, ast.Lt):
            return a < b
        if isinstance(op, ast.LtE):
            return a <= b
        if isinstance(op, ast.Gt):
            return a > b
        return a >= b

    def visit_Tuple(self, node: ast.Tuple) -> Value:
        return tuple(self.visit(e) for e in node.elts)  # type: ignore[return-value]

    def visit_Call(self, node: ast.Call) -> Value:
        name = node.func.id  # type: ignore[attr-defined]
        if name == "known":
            return not isinstance(self.visit(node.args[0]), Unknown)
        if name == "first_known":
            values = []
            for arg in node.args:  # lazily: later arguments are fallbacks only
                v = self.visit(arg)
                if not isinstance(v, Unknown):
                    return v
                values.append(v)
            return merge_unknown(*values)
        args = [self.visit(a) for a in node.args]
        if any(isinstance(a, Unknown) for a in args):
            # min/max over an unknown is unknown: the missing value could be the extreme one.
            return merge_unknown(*args)
        if not all(_is_number(a) for a in args):
            raise self.fail(f"{name}() needs numbers, got {args!r}")
        if name == "abs":
            return abs(args[0])
        return min(args) if name == "min" else max(args)
