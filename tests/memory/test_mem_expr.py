"""The safe expression evaluator: what it computes, three-valued logic, and what it refuses."""

from __future__ import annotations

import pytest

from kernelskill.memory.knowledge.expr import ExprError, ExprTypeError, Unknown, compile_expr

U = Unknown({"m"})  # a missing value named m
ENV = {"a": 2, "b": 3.5, "t": True, "f": False, "u": U, "v": Unknown({"n"}), "tier": "L", "zero": 0}


def ev(source: str, env: dict | None = None):
    return compile_expr(source).evaluate(ENV if env is None else env)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("a + b * 2", 9.0), ("(a + b) * 2", 11.0), ("a / 4", 0.5), ("-a", -2), ("a - b", -1.5),
        ("a < b", True), ("a >= b", False), ("1 < a < 3", True), ("1 < a < 2", False), ("a == 2", True),
        ("a != 2", False), ("tier == 'L'", True), ("tier in ('H', 'M')", False), ("tier not in ('H', 'M')", True),
        ("min(a, b)", 2), ("max(a, b, 10)", 10), ("abs(-b)", 3.5), ("not f", True), ("t and not f", True),
        ("f or t", True), ("known(a)", True), ("known(u)", False), ("first_known(u, a)", 2), ("first_known(a, u)", 2),
        ("True", True), ("1.5e3", 1500.0),
    ],
)  # fmt: skip
def test_values(source, expected):
    assert ev(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # Kleene logic: a decisive known operand wins over an unknown one; otherwise unknown.
        ("f and u", False), ("u and f", False), ("t and u", U), ("u and t", U),
        ("t or u", True), ("u or t", True), ("f or u", U), ("u or f", U), ("not u", U),
        # anything computed from an unknown is unknown, carrying the missing names
        ("u + 1", U), ("u > 3", U), ("a < u", U), ("min(a, u)", U), ("abs(u)", U), ("u == 'L'", U),
        ("u in ('H',)", U), ("1 < a < u", U), ("3 < a < u", False),
    ],
)  # fmt: skip
def test_three_valued_logic(source, expected):
    assert ev(source) == expected


def test_unknown_collects_every_missing_name():
    assert ev("u + v") == Unknown({"m", "n"})
    assert ev("u and v") == Unknown({"m", "n"})
    assert ev("first_known(u, v)") == Unknown({"m", "n"})


def test_division_by_zero_is_undefined_not_an_error():
    result = ev("a / zero")
    assert isinstance(result, Unknown) and not result.missing
    assert result.undefined == ("a / zero divides by zero",)


def test_unknown_refuses_to_be_used_as_a_boolean():
    with pytest.raises(TypeError):
        bool(U)


def test_names_and_string_comparisons_are_collected():
    expr = compile_expr("backend == 'triton' and x > min(y, 3) and tier in ('H', 'M')")
    assert expr.names == {"backend", "x", "y", "tier"}
    assert set(expr.string_comparisons) == {("backend", "triton"), ("tier", "H"), ("tier", "M")}


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("x.__class__", "attribute access"),
        ("().__class__.__bases__[0]", "subscripting"),
        ("__import__('os').system('true')", "not allowed"),
        ("open('/etc/passwd')", "calling open is not allowed"),
        ("eval('1')", "calling eval is not allowed"),
        ("x[0]", "subscripting"),
        ("lambda: 1", "lambda"),
        ("[i for i in x]", "comprehension"),
        ("{1: 2}", "a dict"),
        ("[1, 2]", "a list"),
        ("f'{x}'", "f-string"),
        ("(y := 1)", "assignment"),
        ("min(*x)", "unpacking"),
        ("2 ** 1000", "the ** operator"),
        ("x if y else z", "conditional expression"),
        ("_private > 1", "may not start with '_'"),
        ("__builtins__", "may not start with '_'"),
        ("min(a, key=abs)", "no keyword arguments"),
        ("abs(a, b)", "exactly one argument"),
        ("max()", "at least one argument"),
        ("(1, 2)", "only allowed on the right of 'in'"),
        ("tier in x", "literal tuple"),
        ("None", "constant None"),
        ("b'x'", "constant"),
        ("a +", "syntax error"),
        ("", "empty"),
        ("a or " * 200 + "a", "longer than"),
    ],
)  # fmt: skip
def test_unsafe_or_malformed_expressions_are_rejected(source, reason):
    with pytest.raises(ExprError, match=None) as info:
        compile_expr(source)
    assert reason in str(info.value)


@pytest.mark.parametrize(
    "source",
    ["t + 1", "a and t", "not a", "tier < 3", "tier == 1", "min(tier)", "-tier", "a in (1, 2) and a"],
)
def test_ill_typed_expressions_fail_at_evaluation(source):
    with pytest.raises(ExprTypeError):
        ev(source)


def test_undefined_name_at_evaluation_is_an_error_not_unknown():
    with pytest.raises(ExprTypeError, match="not defined"):
        ev("nosuchname > 1")
