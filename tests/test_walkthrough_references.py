"""Text that sends a reader to a part of walkthrough.md by name (`walkthrough.md, "RoPE"`,
`section "Backpropagation by hand"`) must name a heading the walkthrough has: a renamed heading
otherwise leaves its references pointing nowhere."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WALKTHROUGH = ROOT / "walkthrough.md"
# a quoted name after "walkthrough.md, " or "walkthrough.md section " or (inside the walkthrough)
# after "section "; comment markers and line breaks inside the quote are ignored
REFERENCE = re.compile(r'(?:walkthrough(?:\.md)?,?(?: section)?|[Ss]ection) "([^"]+)"')


def _headings():
    text = WALKTHROUGH.read_text(encoding="utf-8")
    return [re.sub(r"^\d+\.\s*", "", h).strip()
            for h in re.findall(r"^#+ (?:Appendix [A-Z]\. )?(.+)$", text, re.M)]


def _references():
    files = [ROOT / "README.md", WALKTHROUGH, *ROOT.glob("minattn/**/*.py"),
             *ROOT.glob("docs/*.py"), *ROOT.glob("tests/*.py")]
    for path in files:
        if path.name == Path(__file__).name:
            continue
        text = path.read_text(encoding="utf-8")
        flat = re.sub(r"\n\s*(?:#\s*)?", " ", text)  # a reference may run over comment lines
        for name in REFERENCE.findall(flat):
            yield path.relative_to(ROOT), " ".join(name.split())


def test_every_reference_by_name_names_a_heading():
    headings = _headings()
    dangling = [(str(path), name) for path, name in _references()
                if not any(h.startswith(name) for h in headings)]
    assert not dangling, f"references to no heading of walkthrough.md: {dangling}"


def test_the_references_are_found():
    # the check above must see the references it exists for
    names = {name for _, name in _references()}
    assert {"Backpropagation by hand", "Attention sinks"} <= names


def test_every_first_reading_section_ends_with_questions_answered_and_checked():
    # issues 33, 46 and 56: at least two pen-and-paper questions end every section of the first
    # reading; a folded block right after them answers each, with code (run by sybil) that
    # checks the answer
    text = WALKTHROUGH.read_text(encoding="utf-8")
    first = text[:text.index("\n# Second reading\n")]
    sections = re.findall(r"^## (\d+)\. ", first, re.M)
    assert sections == [str(n) for n in range(1, len(sections) + 1)] and len(sections) >= 14
    for n in sections:
        body = re.split(rf"^## {n}\. ", first, flags=re.M)[1]
        body = re.split(r"^(?:## |# )", body, flags=re.M)[0]
        questions = re.findall(rf"^({n}\.\d+)\. ", body, re.M)
        assert "**Questions.**" in body and len(questions) >= 2, (
            f"section {n} ends with fewer than two questions")
        folded = re.search(r"^<details><summary>Answers to [^<]*</summary>\n(.*?)^</details>",
                           body[body.index("**Questions.**"):], re.M | re.S)
        assert folded, f"section {n}: no folded answers after its questions"
        answers = folded[1]
        for q in questions:
            answer = re.search(rf"^\*\*{re.escape(q)}\.\*\* (?:(?!^\*\*\d+\.\d+\.\*\*).)*?"
                               r"\n```python\n>>> ", answers, re.M | re.S)  # before the next answer
            assert answer, f"question {q} has no answer checked by code after the questions"
