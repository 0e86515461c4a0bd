"""The first reading of walkthrough.md is a first text on attention (issue 46): short enough to
assign (at most 75,000 characters), its code the math alone (each excerpt at most 15 lines, no
engineering, at most one argument-check call), nothing in it that sends the reader ahead into
the second reading, at least two questions per section (one of them about why), and an outline
that names every part of the file."""
import re
from pathlib import Path

import pytest

WALKTHROUGH = Path(__file__).resolve().parent.parent / "walkthrough.md"
TEXT = WALKTHROUGH.read_text(encoding="utf-8")
FIRST = TEXT[:TEXT.index("\n# Second reading\n")]
SECOND = TEXT[len(FIRST):]
BODY = FIRST[FIRST.index("\n# Part I:"):]  # the first reading after its introduction
EXCERPT = re.compile(r"<!-- source: ([\w.]+) -->\n```py\n(.*?)```", re.S)

# What the first reading's code must not show: precision policies, devices and threads, autograd
# machinery, policy labels, and the options of particular model families or attention variants.
ENGINEERING = ("dtype=", "astype", "float16", "float32", "float64", "result_type", "cupy",
               "device", "thread", "blas", "isbox", "getval", "primitive", "defvjp",
               "unbroadcast", "gradient_by_hand", "like=", "errstate",
               "gemma", "olmo", "qwen", "mistral", "phi", "deepseek", "llama", "gpt",
               "sinks", "softcap", "query_pre_attn_scalar", "partial_rotary", "rope_scaling",
               "head_mask", "sandwich", "qk_norm", "q_norm", "n_kv_heads", "parallel", "family")


def test_the_first_reading_is_at_most_75000_characters():
    assert len(FIRST) <= 75_000, f"the first reading is {len(FIRST)} characters"


def test_the_first_reading_shows_excerpts():
    assert len(EXCERPT.findall(FIRST)) >= 15  # the checks below must see what they check


@pytest.mark.parametrize("dotted, shown", EXCERPT.findall(FIRST),
                         ids=[d for d, _ in EXCERPT.findall(FIRST)])
def test_each_excerpt_is_short_and_shows_no_engineering(dotted, shown):
    lines = shown.rstrip("\n").splitlines()
    assert len(lines) <= 15, f"the excerpt of {dotted} has {len(lines)} lines"
    found = [w for w in ENGINEERING if w in shown.lower()] + re.findall(r"^\s*@.*", shown, re.M)
    assert not found, f"the excerpt of {dotted} shows engineering: {found}"
    checks = [line for line in lines if re.search(r"\b_?check\w*\(", line)]
    assert len(checks) <= 1, f"the excerpt of {dotted} has {len(checks)} check lines"


def _second_reading_sections():
    return sorted({int(n) for n in re.findall(r"^## (\d+)\. ", SECOND, re.M)})


def _second_reading_titles():
    titles = re.findall(r"^#+ (?:\d+\. |Appendix [A-Z]\. )?(.+)$", SECOND, re.M)
    return [t.strip() for t in titles if len(t.strip()) > 12]


def test_the_first_reading_points_nowhere_into_the_second():
    numbers = _second_reading_sections()
    assert numbers and min(numbers) > max(int(n) for n in re.findall(r"^## (\d+)\. ", FIRST, re.M))
    flat = " ".join(BODY.split())
    cited = [int(n) for ref in re.findall(r"[Ss]ections? ((?:\d+(?:, | and | to |–|-)?)+)", flat)
             for n in re.findall(r"\d+", ref)]
    assert not [n for n in cited if n in numbers], f"sections of the second reading cited: {cited}"
    assert "second reading" not in flat.lower()
    assert not re.findall(r"Appendix [A-E]\b", flat), "the first reading sends to an appendix"
    named = [t for t in _second_reading_titles() if t in flat]
    assert not named, f"the first reading names second-reading headings: {named}"


def _sections():
    parts = re.split(r"^## (\d+)\. .*$", BODY, flags=re.M)
    return [(int(parts[i]), re.split(r"^# ", parts[i + 1], flags=re.M)[0])
            for i in range(1, len(parts), 2)]


def test_every_section_ends_with_two_questions_one_of_them_conceptual():
    sections = _sections()
    assert len(sections) >= 14
    for n, body in sections:
        questions = re.findall(rf"^{n}\.\d+\. (.*)$", body, re.M)
        assert len(questions) >= 2, f"section {n} has {len(questions)} questions"
        assert any("(Why?)" in q for q in questions), f"section {n} asks no conceptual question"


def test_no_answer_is_printed_in_the_first_reading():
    assert "Answer" not in BODY.replace("Answers", ""), "an answer sits in the first reading"


def test_the_outline_names_every_part():
    intro = FIRST[:FIRST.index("\n# Part I:")]
    parts = re.findall(r"^# (Part [IVX]+: [^\n]+|A real model|Attention and recurrence)$", TEXT,
                       re.M)
    assert len(parts) >= 9
    missing = [p for p in parts if p.split(":")[0] not in intro
               or (":" in p and p.split(": ", 1)[1] not in " ".join(intro.split()))]
    assert not missing, f"the outline leaves out {missing}"
