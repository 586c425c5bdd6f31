"""Reading replies: fenced blocks, JSON and code, and the checks on structured replies."""

from __future__ import annotations

import pytest

from kernelskill.agents.replies import (
    ReplyError,
    extract_code,
    extract_json,
    fenced_blocks,
    parse_diagnosis,
    parse_features,
    parse_plan,
)

from .conftest import CANDIDATE, code_reply, plan_context, plan_reply

# json ---------------------------------------------------------------------------------------------------------


def test_json_in_a_fence_with_prose_around():
    assert extract_json('Sure.\n```json\n{"a": 1}\n```\nDone.') == {"a": 1}


def test_json_tag_is_case_insensitive_and_the_last_block_wins():
    text = '```JSON\n{"a": 1}\n```\nOn second thought:\n```Json\n{"a": 2, "extra": [1]}\n```'
    assert extract_json(text) == {"a": 2, "extra": [1]}


def test_whole_reply_as_json_without_a_fence():
    assert extract_json('  \n{"features": {"x": true}}\n ') == {"features": {"x": True}}


def test_untagged_fence_holding_an_object_is_accepted():
    assert extract_json('Here:\n```\n{"a": 1}\n```') == {"a": 1}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("no structure at all", "no ```json block found"),
        ("```json\n{'a': 1}\n```", "not valid JSON"),
        ('```json\n{"a": 1,}\n```', "trailing commas"),
        ("```json\n[1, 2]\n```", "not an object"),
        ("```python\nx = 1\n```", "no ```json block found"),
    ],
)
def test_json_errors_are_written_for_the_model(text, needle):
    with pytest.raises(ReplyError) as info:
        extract_json(text)
    assert needle in str(info.value)


# code ---------------------------------------------------------------------------------------------------------


def test_code_block_is_returned_whole():
    assert extract_code(code_reply()) == CANDIDATE


def test_a_usage_example_after_the_file_is_not_the_candidate():
    text = code_reply() + "And a usage example:\n```python\nm = ModelNew()\nprint(m(x))\n```\n"
    assert extract_code(text) == CANDIDATE


# the shapes real models' replies take: the complete file is the candidate, whatever else the reply restates
KERNELS, CLASS = CANDIDATE[: CANDIDATE.index("class ModelNew")], CANDIDATE[CANDIDATE.index("class ModelNew"):]
STUB = "class ModelNew(nn.Module):\n    def forward(self, x):\n        return _gelu_chain_kernel_launch(x)\n"
IMPORTED_STUB = "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        ...\n"


def fence(source: str, tag: str = "python") -> str:
    return f"```{tag}\n{source.rstrip()}\n```\n"


@pytest.mark.parametrize("text", [
    pytest.param(f"Here it is.\n{fence(CANDIDATE)}", id="one block"),
    pytest.param(f"{fence(CANDIDATE)}\nThe key change, restated:\n{fence(STUB)}", id="file then stub"),
    pytest.param(f"{fence(CANDIDATE)}\nIn short:\n{fence(IMPORTED_STUB)}", id="file then stub with imports"),
    pytest.param(f"The shape of it:\n{fence(STUB)}\nThe whole file:\n{fence(CANDIDATE)}", id="stub then file"),
    pytest.param(f"Sure.\n{fence(CANDIDATE, 'py')}", id="py fence"),
    pytest.param(f"Sure.\n{fence(CANDIDATE, 'python3')}", id="python3 fence"),
    pytest.param(CANDIDATE, id="no fence, whole file"),
])
def test_the_complete_file_is_chosen(text):
    assert extract_code(text) == CANDIDATE


def test_code_split_across_two_blocks_is_joined():
    text = f"First the kernel:\n{fence(KERNELS)}\nThen the module:\n{fence(CLASS)}\nUsage:\n{fence('print(1)')}"
    joined = extract_code(text)
    assert joined == KERNELS.strip("\n") + "\n\n" + CLASS.strip("\n") + "\n"
    compile(joined, "joined", "exec")


def test_of_two_complete_files_the_later_correction_wins_even_when_shorter():
    fixed = CANDIDATE.replace('"""Example candidate for examples/gelu_chain.py: one fused Triton kernel for '
                              'gelu(2x + 1)."""\n', "")
    assert len(fixed) < len(CANDIDATE)
    text = f"{fence(CANDIDATE)}\nWait, a docstring is not needed. Corrected:\n{fence(fixed)}"
    assert extract_code(text) == fixed


def test_when_no_block_is_complete_the_longest_is_reviewed():
    broken = CANDIDATE.replace("def forward(self, x: torch.Tensor)", "def forward(self x)")  # a syntax error
    assert extract_code(f"{fence(broken)}\n{fence(STUB)}") == broken
    assert extract_code(f"{fence(STUB)}\n{fence(broken)}") == broken


def test_longer_fence_keeps_inner_backticks():
    source = 'class ModelNew(nn.Module):\n    doc = """\n```\nnot the end\n```\n"""\n'
    assert extract_code(f"````python\n{source}````") == source


def test_syntax_error_is_accepted():
    # the Reviewer reports it as a compile error and the repair chain fixes it
    assert "def forward(self x)" in extract_code("```python\nclass ModelNew(nn.Module):\n    def forward(self x)\n```")


def test_missing_modelnew_is_rejected():
    with pytest.raises(ReplyError, match="does not define `class ModelNew`"):
        extract_code("```python\nclass Model(nn.Module):\n    pass\n```")


def test_no_python_block_is_rejected():
    with pytest.raises(ReplyError, match="no ```python block found"):
        extract_code("class ModelNew(nn.Module):\n    pass\n")


def test_cut_off_block_is_rejected():
    with pytest.raises(ReplyError, match="not closed"):
        extract_code("```python\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return")


def test_fenced_blocks_reports_tags_and_closure():
    blocks = fenced_blocks("```JSON\n{}\n```\ntext\n~~~\nraw\n~~~\n```python\nx")
    expected = [("json", "{}", True), ("", "raw", True), ("python", "x", False)]
    assert [(b.tag, b.body, b.closed) for b in blocks] == expected


# structured replies -------------------------------------------------------------------------------------------


def test_plan_keeps_extra_fields_and_normalizes_the_method_id(kb):
    plan = parse_plan(plan_reply("Kernel-Fusion"), plan_context(kb))
    assert plan.method == "kernel_fusion"
    assert plan.model_extra == {"confidence": 0.7}


def test_plan_accepts_object_items_as_text(kb):
    text = ('```json\n{"bottleneck": "memory", "method": "kernel_fusion", "plan": "fuse", "evidence": [{"dram": 85}],'
            ' "expected_metric_change": [{"field": "dram_bytes", "direction": "down"}]}\n```')  # fmt: skip
    plan = parse_plan(text, plan_context(kb))
    assert plan.evidence == ["dram: 85"]
    assert plan.expected_metric_change == ["field: dram_bytes; direction: down"]


def test_plan_missing_fields_are_named(kb):
    with pytest.raises(ReplyError) as info:
        parse_plan('```json\n{"method": "kernel_fusion", "plan": null}\n```', plan_context(kb))
    message = str(info.value)
    assert "missing field(s) `bottleneck`, `evidence`, `expected_metric_change`" in message
    assert "invalid field(s) `plan`" in message


def test_plan_method_outside_the_allowed_ids_lists_them(kb):
    with pytest.raises(ReplyError) as info:
        parse_plan(plan_reply("tensor_cores"), plan_context(kb))
    assert "kernel_fusion, vectorize_memory_access, warp_level_reduction" in str(info.value)


def test_plan_free_choice_without_long_term_memory(kb):
    assert parse_plan(plan_reply("my_own_trick"), plan_context(kb, ltm=False)).method == "my_own_trick"


def test_diagnosis_accepts_extra_fields():
    text = ('```json\n{"critical_issue": "a", "root_cause": "b", "evidence": ["c"], "fix": "d", "confidence": "high"}'
            "\n```")  # fmt: skip
    diagnosis = parse_diagnosis(text)
    assert diagnosis.fix == "d" and diagnosis.model_extra == {"confidence": "high"}


def test_features_drop_unknown_names_and_accept_a_missing_wrapper():
    assert parse_features('```json\n{"features": {"a": true, "zzz": 1}}\n```', ["a", "b"]) == {"a": True}
    assert parse_features('{"a": "yes", "b": 3}', ["a", "b"]) == {"a": "yes", "b": 3}


def test_features_with_no_asked_answer_are_an_error():
    with pytest.raises(ReplyError, match="a, b"):
        parse_features('```json\n{"features": {"zzz": 1}}\n```', ["a", "b"])
    with pytest.raises(ReplyError, match='no "features" object'):
        parse_features('```json\n{"features": [true]}\n```', ["a"])
