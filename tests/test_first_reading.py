"""The first reading of walkthrough.md is a first text on attention (issues 46 and 56): Part I a
week's reading that stands on its own and ends with a recap, each section's answers folded right
after its questions, its code the math alone (each excerpt at most 15 lines, no engineering, no
argument checks), every term defined before it is used, the data flow drawn by code from the
running example, nothing in it that sends the reader ahead into the second reading, and an
outline that names every part of the file."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WALKTHROUGH = ROOT / "walkthrough.md"
TEXT = WALKTHROUGH.read_text(encoding="utf-8")
FIRST = TEXT[:TEXT.index("\n# Second reading\n")]
SECOND = TEXT[len(FIRST):]
BODY = FIRST[FIRST.index("\n# Part I:"):]  # the first reading after its introduction
PART_I = FIRST[FIRST.index("\n# Part I:"):FIRST.index("\n# Part II:")]  # sections 1-5, week 1
# section 6, the block, opens Part II (week 2); its exercises 6 to 8 are graded with Part I's
SECTION_6 = FIRST[FIRST.index("\n## 6. "):FIRST.index("\n## 7. ")]
EXCERPT = re.compile(r"<!-- source: ([\w.]+) -->\n```py\n(.*?)```", re.S)
FOLDED = re.compile(r"^<details>.*?^</details>\n", re.M | re.S)

# What the first reading's code must not show: precision policies, devices and threads, autograd
# machinery, policy labels, and the options of particular model families or attention variants.
ENGINEERING = ("dtype=", "astype", "float16", "float32", "float64", "result_type", "cupy",
               "device", "thread", "blas", "isbox", "getval", "primitive", "defvjp",
               "unbroadcast", "gradient_by_hand", "like=", "errstate",
               "gemma", "olmo", "qwen", "mistral", "phi", "deepseek", "llama", "gpt",
               "sinks", "softcap", "query_pre_attn_scalar", "partial_rotary", "rope_scaling",
               "head_mask", "sandwich", "qk_norm", "q_norm", "n_kv_heads", "parallel", "family")

# Part I's time, calibrated on a cold review by a lecturer who did it as a week-1 student would:
# 15 minutes of set-up; prose at 130 words a minute; code, its output and display formulas,
# which a reader traces line by line, at 50 (answers and solutions included); a minute to type
# and run each example block and to read each figure; an exercise whose solution is shown above
# its box 10 minutes, one whose solution is folded 30; a box that finishes earlier exercises 5;
# a question 6 minutes, 8 if it has several parts. A week's reading is at most 5 hours. An
# exercise that builds on a form shown above its box and asks one thing the text has not printed
# (a bug to find in a form it shows, an inverse to write; "The answer is folded below") counts
# as a shown one: what it asks in place of copying is in the words counted, its answer's included.
SETUP_MINUTES, WORDS_PER_MINUTE, TRACED_WORDS_PER_MINUTE = 15, 130, 50
EXAMPLE_MINUTES, SHOWN_MINUTES, FOLDED_MINUTES, FINISHED_MINUTES = 1, 10, 30, 5
QUESTION_MINUTES, PARTS_QUESTION_MINUTES = 6, 8
TRACED = re.compile(r"^```.*?^```|^\$\$.*?\$\$", re.M | re.S)  # code blocks, display formulas
BOX = re.compile(r"^> \*\*Exercises? (\d+(?: and \d+)?)(, finished)?\.\*\*(.*)$", re.M)
QUESTION = re.compile(r"^(\d+\.\d+)\. (.*)$", re.M)
ANSWERED = "The answer is folded below."  # the box of an exercise that builds on a form shown


def several_parts(question):
    # a second question mark, or a second task ("Then ...", "Now ..."), beside "(Why?)"
    asked = question.replace("(Why?)", "")
    return asked.count("?") > 1 or bool(re.search(r"\b(?:Then|Now|Also)\b", asked))


def part_one_minutes():
    return week_minutes(PART_I, SETUP_MINUTES)


def week_minutes(week, setup=0):
    traced = len(" ".join(TRACED.findall(week)).split())
    prose = len(TRACED.sub(" ", week).split())
    examples = len(re.findall(r"^```python\n", week, re.M))
    figures = len(re.findall(r"^!\[", week, re.M))
    boxes = BOX.findall(week)
    answered = [n for n, finished, box in boxes if not finished and ANSWERED in box]
    folded = [n for n, finished, box in boxes
              if not finished and "folded below" in box and ANSWERED not in box]
    shown = [n for n, finished, box in boxes if not finished and "folded below" not in box]
    finished = [n for n, done, _ in boxes if done]
    questions = [q for _, q in QUESTION.findall(week)]
    parts = {"set-up": setup, "prose": prose / WORDS_PER_MINUTE,
             "traced": traced / TRACED_WORDS_PER_MINUTE,
             "examples and figures": EXAMPLE_MINUTES * (examples + figures),
             "exercises": SHOWN_MINUTES * (len(shown) + len(answered))
                          + FOLDED_MINUTES * len(folded),
             "finished": FINISHED_MINUTES * len(finished),
             "questions": sum(PARTS_QUESTION_MINUTES if several_parts(q) else QUESTION_MINUTES
                              for q in questions)}
    counts = {"prose": prose, "traced": traced, "examples": examples, "figures": figures,
              "shown": len(shown), "answered": len(answered), "folded": len(folded),
              "finished": len(finished), "questions": len(questions)}
    return sum(parts.values()), parts, counts


def test_part_one_is_a_weeks_reading_of_at_most_five_hours():
    minutes, parts, counts = part_one_minutes()
    assert minutes <= 300, f"Part I: {minutes:.0f} minutes, {parts}"
    assert counts["answered"] + counts["folded"] == 5 and counts["questions"] >= 10, counts
    # no exercise of Part I is copying: each asks for something the text has not printed
    assert counts["shown"] == 0, counts
    # the road map states the model and the estimate it gives
    roadmap = " ".join(FIRST[:FIRST.index("\n# Part I:")].split())
    said = re.search(r"Week 1 is about (\d+) hours? and (\d+) minutes, counted from the text: "
                     r"(\d+) minutes of set-up; ([\d,]+) words of prose read at (\d+) a minute "
                     r"and ([\d,]+) words of code and formulas traced at (\d+) a minute "
                     r"\((\d+) minutes\); a minute for each of the (\d+) examples you run and the "
                     r"(\d+) figures; (\d+) minutes for each of the (\d+) exercises that build on a "
                     r"form shown above their box \(a bug to find, an inverse to write; their "
                     r"answers folded\), (\d+) for the (\d+) whose solutions? (?:is|are) "
                     r"folded, and (\d+) for each of the (\d+) boxes that finish an earlier "
                     r"exercise; (\d+) minutes for each of the (\d+) questions \((\d+) for a "
                     r"question of several parts.*?\)\. This is an estimate for a student who "
                     r"types the forms the text shows; plan for up to about a quarter more \(about "
                     r"(\d+) hours and (\d+) minutes\) for a student who works everything out "
                     r"alone\.", roadmap)
    assert said, "the road map does not state the time model"
    n = [int(g.replace(",", "")) for g in said.groups()]
    assert (n[2], n[4], n[6], n[10], n[12], n[14], n[16], n[18]) == (
        SETUP_MINUTES, WORDS_PER_MINUTE, TRACED_WORDS_PER_MINUTE, SHOWN_MINUTES, FOLDED_MINUTES,
        FINISHED_MINUTES, QUESTION_MINUTES, PARTS_QUESTION_MINUTES), n
    assert (n[8], n[9], n[11], n[13], n[15], n[17]) == (
        counts["examples"], counts["figures"], counts["answered"], counts["folded"],
        counts["finished"], counts["questions"]), (n, counts)
    assert abs(n[3] - counts["prose"]) <= 0.02 * counts["prose"], (n[3], counts)
    assert abs(n[5] - counts["traced"]) <= 0.02 * counts["traced"], (n[5], counts)
    assert abs(n[7] - parts["prose"] - parts["traced"]) <= 2, (n[7], parts)
    assert abs(60 * n[0] + n[1] - minutes) <= 5, (n[:2], minutes)
    assert abs(60 * n[19] + n[20] - 1.25 * minutes) <= 5 and 60 * n[19] + n[20] <= 300, n[19:]


# weeks 2 and 3: Part II (sections 6-10), then Part III and A real model (sections 11-14)
PART_II = FIRST[FIRST.index("\n# Part II:"):FIRST.index("\n# Part III:")]
PART_III = FIRST[FIRST.index("\n# Part III:"):]


def test_weeks_two_and_three_state_their_time_by_the_same_model_each_four_to_five_hours():
    roadmap = " ".join(FIRST[:FIRST.index("\n# Part I:")].split())
    said = re.search(r"By the same count, week 2 is about (\d+) hours? and (\d+) minutes and week "
                     r"3 about (\d+) hours? and (\d+) minutes\.", roadmap)
    assert said, "the road map does not state weeks 2 and 3"
    n = [int(g) for g in said.groups()]
    for week, (hours, minutes) in ((PART_II, n[:2]), (PART_III, n[2:])):
        counted, parts, counts = week_minutes(week)
        assert abs(60 * hours + minutes - counted) <= 5, (hours, minutes, counted, parts, counts)
        # a week of 4 to 5 hours: week 3 was once 2 h 43 min, a week that could not be assigned
        assert 240 <= counted <= 300, (counted, parts, counts)


def test_each_question_of_part_one_asks_one_thing_its_why_first():
    for number, question in QUESTION.findall(PART_I):
        assert not several_parts(question), f"question {number} has several parts"
        assert "(Why?)" not in question or question.startswith("(Why?) "), number


def test_part_one_ends_with_a_recap_and_the_road_map_gives_three_weeks():
    last = PART_I.rstrip().rsplit("\n\n", 1)[-1]
    assert last.startswith("**Recap of Part I.**"), last[:80]
    roadmap = FIRST[:FIRST.index("\n# Part I:")]
    weeks = re.findall(r"^\| (\d) \| \*(Part [IV]+: [^*]+)\*", roadmap, re.M)
    assert [w for w, _ in weeks] == ["1", "2", "3"], weeks


def test_the_set_up_comes_before_any_code_with_its_commands_in_order():
    first_code = FIRST.index("```python\n")
    setup = FIRST[FIRST.index("**Set-up.**"):first_code]  # ValueError if it comes after the code
    commands = [line.split("  #")[0].strip()
                for line in re.search(r"```bash\n(.*?)```", setup, re.S)[1].splitlines()]
    assert commands == ["git clone ADDRESS minattn", "cd minattn", "python -m venv .venv",
                        "source .venv/bin/activate", 'pip install ".[check]"',
                        "python -m minattn exercises my_attention/"], commands
    setup_cfg = (ROOT / "setup.cfg").read_text(encoding="utf-8")
    assert re.search(r"^check =\n    hypothesis", setup_cfg, re.M)  # the extra the grader needs


def test_part_one_is_sections_one_to_five_in_the_road_map_its_headings_and_its_recap():
    roadmap = FIRST[:FIRST.index("\n# Part I:")]
    rows = {week: (int(first), int(last)) for week, first, last in re.findall(
        r"^\| (\d) \| \*Part [IV]+: [^*]+\*[^|]* \| (\d+)–(\d+) \|", roadmap, re.M)}
    assert rows["1"] == (1, 5) and rows["2"] == (6, 10), rows
    assert [int(n) for n in re.findall(r"^## (\d+)\. ", PART_I, re.M)] == [1, 2, 3, 4, 5]
    part_2 = FIRST[FIRST.index("\n# Part II:"):FIRST.index("\n# Part III:")]
    assert [int(n) for n in re.findall(r"^## (\d+)\. ", part_2, re.M)] == [6, 7, 8, 9, 10]
    assert "Week 2 starts here." in part_2[:part_2.index("\n## 6. ")]
    recap = PART_I[PART_I.index("**Recap of Part I.**"):]
    for taught in ("softmax", "$\\sqrt{d_k}$", "causal mask", "padding mask", "heads"):
        assert taught in recap, taught
    for later in ("LayerNorm", "block", "feed-forward", "residual", "encoder"):
        assert later not in recap, later
    # no sentence anywhere still puts section 6 into Part I or week 1
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for text in (TEXT, readme):
        flat = " ".join(text.split())
        assert not re.search(r"sections 1[–-]6|section 6 of Part I\b|Part I \(sections 1", flat)


def test_each_exercise_box_grades_its_own_exercises():
    boxes = BOX.findall(PART_I + SECTION_6)
    # eight exercises; 1 and 2 finished in one box after masks, 3 after heads; 6 to 8 in section 6
    assert [(n, bool(f)) for n, f, _ in boxes] == [
        ("1", False), ("2", False), ("3", False), ("1 and 2", True), ("4", False), ("3", True),
        ("5", False), ("6", False), ("7", False), ("8", False)], boxes
    assert [n for n, _, _ in BOX.findall(PART_I)][-1] == "5"
    stubs = {int(p.name[:2]): p.name for p in (ROOT / "minattn" / "course" / "exercises").glob(
        "0[1-8]_*.py")}
    for numbers, _, box in boxes:
        commands = re.findall(r"`python -m minattn check ([^`]*)`", box)
        assert commands == [f"my_attention/{stubs[int(n)]}" for n in numbers.split(" and ")], (
            numbers, commands)


def test_section_four_shows_the_padding_mask_without_heads():
    section_4 = PART_I[PART_I.index("## 4. "):PART_I.index("## 5. ")]
    assert "[B, 1, 1" not in section_4 and "[B, 1, L_k]" in section_4
    assert "[B, 1, 1, L_k]" in PART_I[PART_I.index("## 5. "):]


def test_a_softmax_without_its_mask_passes_exercise_one_until_section_four(tmp_path):
    # section 2's exercise 1 leaves the mask out: its mask properties wait at --part 1, and
    # fail from --part 2, when Part I is behind the student
    pytest.importorskip("hypothesis")
    import io

    from minattn.course import grader
    path = tmp_path / "01_softmax.py"
    path.write_text("import numpy as np\n\n\ndef softmax(x, axis=-1):\n"
                    "    e = np.exp(x - np.max(x, axis=axis, keepdims=True))\n"
                    "    return e / np.sum(e, axis=axis, keepdims=True)\n", encoding="utf-8")
    out = io.StringIO()
    assert grader.grade_files([path], 5, out, part=1) == "passes", out.getvalue()
    assert "WAIT  softmax_masked_entries_are_zero" in out.getvalue()
    # the summary says what its counts count: the WAIT lines, and the properties not listed
    said = re.search(r"; (\d+) waiting \(the WAIT lines above\); (\d+) more of later parts, "
                     r"not listed$", out.getvalue().strip())
    assert said and int(said[1]) == len(re.findall(r"^WAIT  ", out.getvalue(), re.M))
    out = io.StringIO()
    assert grader.grade_files([path], 5, out, part=2) == "fails", out.getvalue()


def test_the_first_reading_shows_excerpts():
    assert len(EXCERPT.findall(FIRST)) >= 15  # the checks below must see what they check


@pytest.mark.parametrize("dotted, shown", EXCERPT.findall(FIRST),
                         ids=[d for d, _ in EXCERPT.findall(FIRST)])
def test_each_excerpt_is_short_and_shows_no_engineering(dotted, shown):
    lines = shown.rstrip("\n").splitlines()
    assert len(lines) <= 15, f"the excerpt of {dotted} has {len(lines)} lines"
    found = [w for w in ENGINEERING if w in shown.lower()] + re.findall(r"^\s*@.*", shown, re.M)
    assert not found, f"the excerpt of {dotted} shows engineering: {found}"
    assert not re.search(r"\bchecks\.|\b_?check_\w*\(", shown), f"{dotted} shows argument checks"


def test_the_plain_forms_call_no_minattn_function():
    # a plain form computes with plain NumPy and other plain forms, never minattn's own
    for dotted, shown in EXCERPT.findall(FIRST):
        if dotted.startswith("minattn.course.teaching."):
            assert "ma." not in shown, f"the plain form {dotted} calls minattn"
    source = (ROOT / "minattn" / "course" / "teaching.py").read_text(encoding="utf-8")
    assert not re.findall(r"^\s*(?:import minattn|from minattn|from \.)", source, re.M)


@pytest.mark.parametrize("detour", [
    "SimpleNamespace", "__file__", "installed(", "9.999999", "take_along_axis`", "-1e9",
    "checks.check", "last-bit", "float64 scalar", "average_weights", "return_weights=True`,"])
def test_the_first_reading_takes_no_detour(detour):
    prose = EXCERPT.sub("", BODY)
    assert detour not in prose


@pytest.mark.parametrize("detour", ["dropout", "[^", "GELU", "std + eps", "warm-up",
                                    "cross-attention", "translation", "Llama", "GPT-2", "BERT",
                                    "hypothesis", "float32"])
def test_part_one_leaves_what_week_one_does_not_need_to_later(detour):
    assert detour not in FIRST[:FIRST.index("\n# Part II:")]


def test_part_one_needs_no_pytorch():
    assert not re.search(r"torch|PyTorch", PART_I + SECTION_6)
    stubs = sorted((ROOT / "minattn" / "course" / "exercises").glob("0[1-8]_*.py"))
    assert len(stubs) == 8 and not [p.name for p in stubs if "torch" in p.read_text()]


# Each solution Part I and section 6 give, pasted into its stub as a student would (after the stub's own
# function, which it replaces): the plain forms the text shows (the excerpts of
# minattn.course.teaching, and section 4's causal_mask), with the steps of "Exercises 1 and 2,
# finished" done as that box words them, using only what the stub imports -> graded by the
# exercise's command, exit 0. What week 1 does not teach (dropout, GELU, averaged or returned
# weights) the grader leaves to later parts.
SOLUTIONS = {
    "01_softmax.py": ("softmax",),
    "02_attention.py": ("scaled_dot_product_attention",),
    "03_masks.py": ("padding_mask",),
    "04_heads.py": ("split_heads", "merge_heads"),
    "05_multi_head_attention.py": ("project", "multi_head_attention"),
    "06_layer_norm.py": ("layer_norm",),
    "07_feed_forward.py": ("feed_forward",),
    "08_encoder_block.py": ("encoder_block",),
}


def finished_as_worded(name, source):
    """The plain form of exercise 1 or 2 with its mask added as "Exercises 1 and 2, finished"
    says, word for word (the calls it names, in backquotes)."""
    box = [b for n, finished, b in BOX.findall(PART_I) if n == "1 and 2" and finished][0]
    if name == "softmax":
        parameter, returned = re.search(r"`softmax` a parameter `(\w+=None)` after `axis`: when "
                                        r"a mask is given, it returns `([^`]+)`", box).groups()
        head = "def softmax(x, axis=-1):\n"
        assert head in source
        return source.replace(head, f"def softmax(x, axis=-1, {parameter}):\n"
                                    f"    if mask is not None:\n        return {returned}\n")
    plain, masked = re.search(r"compute its weights as `([^`]+)` when `mask` is None and as "
                              r"`([^`]+)` otherwise", box).groups()
    weights = re.search(r"^    weights = .*$", source, re.M)[0]  # the line section 4 finishes
    return source.replace(weights, f"    weights = {plain} if mask is None else {masked}")


@pytest.mark.parametrize("file", sorted(SOLUTIONS))
def test_each_solution_part_one_gives_passes_its_exercises_command(file, tmp_path):
    pytest.importorskip("hypothesis")
    import inspect
    import subprocess
    import sys

    from minattn.course import teaching

    names = SOLUTIONS[file]
    shown = [EXCERPT_OF[name] for name in names]
    for name, source in zip(names, shown):  # the text shows what teaching.py holds
        assert source == inspect.getsource(getattr(teaching, name)), name
    if file in ("01_softmax.py", "02_attention.py"):
        shown = [finished_as_worded(names[0], shown[0])]
    if file == "03_masks.py":  # section 4's form, without section 9's align and window
        shown.insert(0, re.search(r">>> (def causal_mask\(.*?)\n>>> bool", PART_I, re.S)[1]
                     .replace(">>> ", "").replace("... ", ""))
    path = tmp_path / file
    stub = (ROOT / "minattn" / "course" / "exercises" / file).read_text(encoding="utf-8")
    path.write_text(stub + "\n\n" + "\n\n".join(shown), encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "minattn", "check", str(path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "FAIL" not in run.stdout and "passed, 0 failed" in run.stdout, run.stdout


EXCERPT_OF = {dotted.rsplit(".", 1)[1]: shown for dotted, shown in EXCERPT.findall(FIRST)
              if dotted.startswith("minattn.course.teaching.")}


# (term, its definition, the section that defines it): the term appears in the first reading's
# prose (excerpts of code aside) only after its definition, in the heading of the section that
# defines it, or on a line that names that section ("section 9 explains them").
TERMS = [
    ("`H`", "*Multi-head attention* runs `H`", 5),
    ("[B, 1, 1, L_k]", "a *batch*: `B` sentences", 4),
    ("`w_q`", "`w_q`, `w_k`, `w_v` and `w_o` hold", 5),
    ("`B`", "a *batch*: `B` sentences", 4),
    ("LayerNorm", "*LayerNorm* rescales", 6),
    ("pre-norm", "- *pre-norm*", 6),
    ("post-norm", "- *post-norm*", 6),
    ("residual", "**The residual connection.**", 6),
    ("sublayer", "(*sublayers*)", 6),
    ("cache", "*KV cache* keeps them", 9),
    ("window", "**A sliding window.**", 9),
    ("n_kv_heads", "`n_kv_heads=3`: the 9 query heads", 14),
    ("**config", "`**config` passes", 8),
    ("tree_map", "`tree_map` (`minattn/engine/trees.py`", 12),
    ("logits", "the *logits*", 8),
    ("cross-entropy", "**The loss: cross-entropy", 8),
    ("Adam", "**Adam.**", 12),
    ("instruction-tuned", "*instruction-tuned*", 14),
    ("quantized", "*quantized*", 14),
    ("GGUF", "*GGUF*", 14),
    ("wheel", "a *wheel*", 14),
    ("extra", "*extra*", 14),
    ("eos_token_id", "`eos_token_id` is the id", 14),
    ("`gamma`", "$\\gamma$ `gamma` all ones", 6),
    ("init_encoder_block", "`ma.init_encoder_block(rng, D, H, F)` returns", 6),
]

# Terms of the header and its set-up box, before Part I: defined before use in the whole text.
HEADER_TERMS = [
    ("PyPI", "PyPI, Python's public package index"),
    ("virtual environment", "A *virtual environment*"),
    ("grader", "the *grader*, `python -m minattn check`"),
    ("stub", "(a *stub*)"),
    ("SmolLM2", "SmolLM2, a small language model"),
    ("Jupyter", "Jupyter runs in the browser"),
    ("KV cache", "the KV cache (the keys and values a model keeps"),
    ("init_multi_head_attention", "`ma.init_multi_head_attention(rng, D, H)` makes"),
]


@pytest.mark.parametrize("term, definition", HEADER_TERMS, ids=[t for t, _ in HEADER_TERMS])
def test_no_term_of_the_header_is_used_before_its_definition(term, definition):
    prose = EXCERPT.sub("", FIRST)
    assert prose.count(definition) == 1, f"the definition of {term} is not found once"
    before = prose[:prose.index(definition)]
    assert term not in before, f"{term} is used before its definition"


@pytest.mark.parametrize("term, definition, section", TERMS, ids=[t for t, _, _ in TERMS])
def test_no_term_is_used_before_its_definition(term, definition, section):
    prose = EXCERPT.sub("", BODY)
    assert prose.count(definition) == 1, f"the definition of {term} is not found once"
    before = prose[:prose.index(definition)]
    early = [line for line in before.splitlines()  # a heading names what its section defines
             if term in line and f"section {section}" not in line and not line.startswith("#")]
    assert not early, f"{term} is used before its definition: {early[0][:120]}"


def test_answers_follow_their_questions_and_appendix_f_holds_none_of_them():
    appendix_f = SECOND[SECOND.index("## Appendix F."):]
    numbers = [int(n) for n in re.findall(r"^## (\d+)\. ", FIRST, re.M)]
    assert not re.findall(rf"^\*\*(?:{'|'.join(map(str, numbers))})\.\d+\.\*\*", appendix_f, re.M)
    # the rest of the check, each question answered by code in its section's folded block:
    # tests/test_walkthrough_references.py


def test_the_data_flow_figures_are_shown_in_their_sections():
    sections = dict(re.findall(r"^## (\d+)\. .*?\n(.*?)(?=^#{1,2} )", BODY, re.M | re.S))
    for section, name in (("3", "running_example.png"), ("5", "heads.png"),
                          ("8", "language_model.png")):
        assert f"(docs/figures/{name})" in sections[section], f"section {section} lacks {name}"
        assert (ROOT / "docs" / "figures" / name).read_bytes()[:4] == b"\x89PNG"


def test_the_induction_numbers_quoted_are_those_of_the_committed_run():
    run = json.loads((ROOT / "docs" / "figures" / "induction.json").read_text(encoding="utf-8"))
    one = json.loads((ROOT / "docs" / "figures" / "induction_one_layer.json").read_text(
        encoding="utf-8"))
    section = BODY[BODY.index("**The induction head**"):BODY.index("## 14. ")]
    percent = lambda x: f"{round(100 * x)}%"  # noqa: E731
    layer_1 = run["induction_scores"][1]
    quoted = [
        f"{run['loss_second_half']:.2f} nats a token",
        f"the model pays {run['loss_first_half']:.2f}",
        f"({percent(run['previous_token_scores'][0][3])} of",
        f"({percent(layer_1[2])} and {percent(layer_1[3])})",
        f"from {run['loss_second_half']:.2f} to "
        f"{run['ablation']['induction_heads_ablated']['loss_second_half']:.2f}",
        f"stays at {max(one['induction_scores'][0]):.2f}",
        f"against {max(layer_1):.2f} for two layers",
    ]
    flat = " ".join(section.split())
    missing = [q for q in quoted if q not in flat]
    assert not missing, f"not quoted as the committed run has it: {missing}"
    assert run["steps"] == 1000


def test_the_first_reading_points_nowhere_into_the_second():
    numbers = _second_reading_sections()
    assert numbers and min(numbers) > max(int(n) for n in re.findall(r"^## (\d+)\. ", FIRST, re.M))
    flat = " ".join(BODY.split())
    cited = [int(n) for ref in re.findall(r"[Ss]ections? ((?:\d+(?:, | and | to |–|-)?)+)", flat)
             for n in re.findall(r"\d+", ref)]
    assert not [n for n in cited if n in numbers], f"sections of the second reading cited: {cited}"
    assert "second reading" not in flat.lower()
    assert not re.findall(r"Appendix [A-F]\b", flat), "the first reading sends to an appendix"
    named = [t for t in _second_reading_titles() if t in flat]
    assert not named, f"the first reading names second-reading headings: {named}"


def _second_reading_sections():
    return sorted({int(n) for n in re.findall(r"^## (\d+)\. ", SECOND, re.M)})


def _second_reading_titles():
    titles = re.findall(r"^#+ (?:\d+\. |Appendix [A-Z]\. )?(.+)$", SECOND, re.M)
    return [t.strip() for t in titles if len(t.strip()) > 12]


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


def test_the_outline_names_every_part():
    # the first reading's parts in the road map, the second reading's where it begins
    intro = FIRST[:FIRST.index("\n# Part I:")] + SECOND[:SECOND.index("\n## ")]
    parts = re.findall(r"^# (Part [IVX]+: [^\n]+|A real model|Attention and recurrence)$", TEXT,
                       re.M)
    assert len(parts) >= 9
    missing = [p for p in parts if p.split(":")[0] not in intro
               or (":" in p and p.split(": ", 1)[1] not in " ".join(intro.split()))]
    assert not missing, f"the outline leaves out {missing}"


# --- issue 56's cold review of Part I: each point held ----------------------------------------

def test_a_function_called_with_a_mask_it_does_not_take_gets_a_hint_naming_it(tmp_path):
    # "Exercises 1 and 2, finished" misread: teaching's softmax (no mask) given mask=
    pytest.importorskip("hypothesis")
    import io

    from minattn.course import grader
    stub = (ROOT / "minattn" / "course" / "exercises" / "02_attention.py").read_text()
    path = tmp_path / "02_attention.py"
    path.write_text(stub + "\n\ndef scaled_dot_product_attention(q, k, v, mask=None, *, "
                    "scale=None):\n    scale = q.shape[-1] ** -0.5 if scale is None else scale\n"
                    "    weights = softmax(q @ np.swapaxes(k, -1, -2) * scale, mask=mask)\n"
                    "    return weights @ v, weights\n", encoding="utf-8")
    out = io.StringIO()
    assert grader.grade_files([path], 2, out, shrink=False, part=1) == "fails"
    hints = re.findall(r"^ +hint: (.*)$", out.getvalue(), re.M)
    assert hints and all("calls softmax(..., mask=...), but that softmax takes no mask" in h
                         and "masked_softmax(scores, mask)" in h for h in hints), hints


def test_a_student_can_try_a_stub_as_the_set_up_says(tmp_path):
    # the set-up's command, `python -i my_attention/01_softmax.py`, and its example typed
    # without the prompt, on exercise 1's solution; every stub imports NumPy as np
    import subprocess
    import sys
    header = " ".join(FIRST[:FIRST.index("\n# Part I:")].split())
    command = "`python -i my_attention/01_softmax.py`, then `>>> softmax(np.array([1.0, 2.0, 3.0]))`"
    assert command in header and "without those four characters" in header
    for stub in sorted((ROOT / "minattn" / "course" / "exercises").glob("0[1-8]_*.py")):
        assert re.search(r"^import numpy as np$", stub.read_text(), re.M), stub.name
    path = tmp_path / "01_softmax.py"
    path.write_text((ROOT / "minattn" / "course" / "exercises" / "01_softmax.py").read_text()
                    + "\n\n" + EXCERPT_OF["softmax"], encoding="utf-8")
    typed = command.split("`>>> ")[1].rstrip("`") + "\n"
    run = subprocess.run([sys.executable, "-i", str(path)], input=typed, capture_output=True,
                         text=True, timeout=60, env={**__import__("os").environ,
                                                     "PYTHONPATH": str(ROOT)})
    assert "array([0.09003057, 0.24472847, 0.66524096])" in run.stdout, run.stdout + run.stderr


def test_part_one_writes_no_division_that_reads_two_ways():
    # 6/4D reads as (6/4) D: a product after a slash is bracketed
    maths = re.findall(r"\$\$.*?\$\$|\$[^$\n]+\$", FIRST[:FIRST.index("\n# Part II:")], re.S)
    ambiguous = [m for m in maths if re.search(r"/\s*\d*\.?\d+\s*[A-Za-z\\(]|/\s*[A-Za-z]\w*\s"
                                               r"*(?:\\cdot|\\times)", m)]
    assert not ambiguous, ambiguous


@pytest.mark.parametrize("said, wrong", [
    ("the dict entries named `w_q`", "the keys of $W^Q$"),
    ("key:  the  *keys*  to", "keys:  the  keys  to"),
    ('"is early" (one of the sentence\'s first two words)', "stands early in the sentence"),
    ("the values of both *the*s and of *to* are $[0, 0]$", "twice as strongly"),
    ("up to, but not including, `(h+1)·d_k`", "`h·d_k … (h+1)·d_k`"),
    ("in a range that keeps the outputs' scale near the inputs'", "recomputes them"),
    ("nudges each number of the model", "passed to the softmax"),
    ("barely moves the numbers", "sqrt{6/(4D)}"),
    ("readers who know Python and NumPy.", "NumPy and gradient descent"),
    ("until section 5, which adds an axis for the heads", "for section 5."),
    ("With $D = 8$ features, someone proposes", "the stub imports both; its `softmax`"),
    ("the imported `softmax` takes no mask", "biases may be added"),
    ("`--part 2`, which adds the properties Part II teaches", "head 2 hold?"),
    ("a vector added after the product", "as WAIT: section 4 adds the mask."),
    ("Heads count from 0", "you need not know why"),
    ("you can skip them when you read the report", "Week 1 is about 4 hours and 54"),
    ("If `python` is not found (macOS, Linux), type `python3`", "using `masked_softmax` above"),
    ("apt install python3-venv", "try it on a few rows, and grade it"),
    ("Rows 3 and 4 are the queries of the two filler tokens", "mask[1, 0]"),
    ("inside minattn's own functions of later sections", "tests/test_first_reading.py"),
])
def test_the_cold_reviews_points_are_fixed(said, wrong):
    week_1 = " ".join(FIRST[:FIRST.index("\n# Part II:")].split())
    assert " ".join(said.split()) in week_1 and wrong not in week_1, said


def test_section_five_finishes_the_padding_mask_after_the_reshape_and_six_names_the_params():
    section_5 = PART_I[PART_I.index("## 5. "):]
    assert section_5.index("The transpose matters") < section_5.index("def padding_mask") \
        < section_5.index("**Exercise 3, finished.**")
    section_6 = SECTION_6
    ex_7, ex_8 = section_6.index("**Exercise 7.**"), section_6.index("**Exercise 8.**")
    prose = EXCERPT.sub("", section_6[:ex_7])
    assert all(f"`{name}`" in prose for name in ("w_1", "b_1", "w_2", "b_2"))
    prose = EXCERPT.sub("", section_6[:ex_8])
    assert all(f"`{name}`" in prose for name in ("self_attention", "feed_forward",
                                                 "self_attention_norm", "feed_forward_norm",
                                                 "gamma", "beta"))
    assert "`final_norm=True`" in section_6 and "`final_norm`" in section_6


# The figures Part I and section 6 show, and the functions that draw them (docs/make_figures.py,
# docs/data_flow_figures.py).
PART_ONE_FIGURES = {"running_example.png": ("data_flow_figures", "draw_running_example"),
                    "saturation.png": ("make_figures", "saturation"),
                    "masks.png": ("make_figures", "masks"),
                    "heads.png": ("data_flow_figures", "draw_heads"),
                    "attention_block.png": ("make_figures", "attention_block")}


def test_part_one_figures_name_only_what_the_text_has_printed_before_them(tmp_path, monkeypatch):
    # each name a figure's titles and captions use as code (a call, an index, a snake_case
    # name) appears, as written, in the code the text has shown before the figure
    pytest.importorskip("matplotlib")
    import importlib
    import sys

    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    monkeypatch.syspath_prepend(str(ROOT / "docs"))
    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: drawn.append(
        [t.get_text() for t in fig.texts] + [fig._suptitle.get_text() if fig._suptitle else ""]
        + [ax.get_title() for ax in fig.axes]))
    shown = re.findall(r"^!\[[^\]]*\]\(docs/figures/([^)]+)\)", PART_I + SECTION_6, re.M)
    assert sorted(shown) == sorted(PART_ONE_FIGURES)
    for name in shown:
        module, function = PART_ONE_FIGURES[name]
        getattr(importlib.import_module(module), function)(str(tmp_path / name))
        titles = " ".join(drawn[-1])
        before = FIRST[:FIRST.index(f"(docs/figures/{name})")]
        code = " ".join(re.findall(r"^```py(?:thon)?\n(.*?)^```", before, re.M | re.S))
        named = set(re.findall(r"\b[A-Za-z_]\w*\[[^\]]*\]|\b[A-Za-z_]\w*(?=\()|\b[a-z]\w*_\w+",
                               titles))
        missing = sorted(n for n in named if n not in code)
        assert not missing, f"{name} names {missing} before the text shows them"
    sys.modules.pop("make_figures", None)
    sys.modules.pop("data_flow_figures", None)
