"""python -m minattn chat: the reply streams to stdout as generate computes it, multi-byte
characters whole; the conversation is kept; Ctrl-C ends a reply or the session; bad input is one
line on stderr with exit code 2. The model is loaded once (the CLI's loader is pointed at it)."""
import io
import subprocess
import sys

import numpy as np
import pytest

for _module in ("gguf", "tokenizers", "jinja2"):
    pytest.importorskip(_module, reason=f"{_module} is not installed: pip install '.[chat]'")

import minattn as ma  # noqa: E402
from minattn import cli  # noqa: E402
from minattn.models import chat_model  # noqa: E402

QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def model():
    return chat_model.load_language_model()


@pytest.fixture
def run(model, monkeypatch, capsys):
    """argv -> (exit code, stdout, stderr), the CLI's load_language_model returning `model`."""
    monkeypatch.setattr(chat_model, "load_language_model", lambda path=None: model)

    def run(*argv, lines=()):
        feed = iter(lines)

        def fake_input(prompt=""):
            try:
                return next(feed)
            except StopIteration:
                raise EOFError from None
        monkeypatch.setattr("builtins.input", fake_input)
        code = cli.main(["chat", *argv])
        out, err = capsys.readouterr()
        return code, out, err
    return run


def _greedy_reply(model, messages, n):
    ids = np.array([model.tokenizer.encode(model.chat_prompt(messages))])
    out = ma.generate(model.params, ids, n, eos_token_id=model.eos_token_id,
                      **model.config)[0, ids.shape[1]:]
    return model.tokenizer.decode(out[out != model.eos_token_id])


def test_prompt_answers_once_with_what_generate_computes(model, run):
    code, out, err = run("--prompt", QUESTION, "--max-new-tokens", "12")
    assert code == 0
    assert out == _greedy_reply(model, [{"role": "user", "content": QUESTION}], 12) + "\n"
    assert "Paris" in out
    loading, stats = err.splitlines()
    assert loading == f"loading {chat_model.default_model_path().name} ..."
    assert stats.startswith("[prompt 37 tokens, read in ") and "tokens/s" in stats


@pytest.mark.parametrize("text, said", [("", "reply 0 tokens]"), (" Paris", "reply 1 token]"),
                                        (" Paris is", "reply 2 tokens, ")])
def test_the_status_line_counts_in_words_and_gives_a_rate_from_two_tokens(model, run,
                                                                          monkeypatch, text,
                                                                          said):
    tokens = model.tokenizer.encode(text)
    monkeypatch.setattr(model, "reply", lambda ids, *a, **k: iter(tokens))
    code, _, err = run("--prompt", "hi", "--max-new-tokens", "5")
    stats = err.splitlines()[-1]
    assert code == 0 and said in stats, stats
    assert ("tokens/s" in stats) == (len(tokens) > 1), stats


def test_the_system_message_replaces_the_templates(model, run, monkeypatch):
    seen = []
    monkeypatch.setattr(model, "reply", lambda ids, *a, **k: seen.append(ids) or iter([]))
    run("--prompt", "hi", "--system", "Be brief.")
    assert model.tokenizer.decode(seen[0]).startswith("<|im_start|>system\nBe brief.<|im_end|>")


def test_a_session_keeps_the_conversation(model, run, monkeypatch):
    prompts = []
    replies = iter([model.tokenizer.encode("Hello there!"), model.tokenizer.encode("Bye.")])
    monkeypatch.setattr(model, "reply", lambda ids, *a, **k: prompts.append(ids) or
                        iter(next(replies)))
    code, out, _ = run(lines=["Hi", "", "Again"])  # an empty line is skipped; then Ctrl-D
    assert code == 0 and out == "Hello there!\nBye.\n"
    assert model.tokenizer.decode(prompts[1]) == model.chat_prompt([
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello there!"},
        {"role": "user", "content": "Again"}])


def test_multi_byte_characters_stream_whole(model, run, monkeypatch):
    text = "日本語 😀 café"
    ids = model.tokenizer.encode(text)
    assert any(model.tokenizer.decode(ids[:i]).endswith("\ufffd") for i in range(len(ids)))
    monkeypatch.setattr(model, "reply", lambda *a, **k: iter(ids))
    streamed = []
    monkeypatch.setattr("builtins.print", lambda *a, **k: streamed.append(
        (a, k)) if k.get("file") is None else None)
    run("--prompt", "hi")
    pieces = [a[0] for a, _ in streamed if a]
    assert "".join(pieces) == text and not any("\ufffd" in p for p in pieces)


def _interrupted_after(tokens):
    def reply(*args, **kwargs):
        yield from tokens
        raise KeyboardInterrupt
    return reply


def test_ctrl_c_ends_a_reply_and_the_one_shot_run(model, run, monkeypatch):
    monkeypatch.setattr(model, "reply", _interrupted_after(model.tokenizer.encode("Par")))
    code, out, err = run("--prompt", QUESTION)
    assert (code, out) == (130, "Par\n") and "stopped" in err


def test_ctrl_c_in_a_session_ends_the_reply_not_the_session(model, run, monkeypatch):
    monkeypatch.setattr(model, "reply", _interrupted_after(model.tokenizer.encode("Par")))
    code, out, _ = run(lines=["Hi", "Hi again"])
    assert (code, out) == (0, "Par\nPar\n")


@pytest.mark.parametrize("argv, message", [
    (["--prompt", "x", "--max-new-tokens", "9000"], "more than the model's context of 8192"),
    (["--prompt", "x", "--top-k", "5"], "--temperature 0 (the default) does not sample"),
])
def test_bad_input_is_one_line_and_exit_code_2(run, argv, message):
    code, out, err = run(*argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err


@pytest.mark.parametrize("argv, message", [
    (["--model", "no/such/file.gguf"], "'no/such/file.gguf' does not exist"),
    (["--temperature", "-1"], "must be a finite number >= 0"),
    (["--top-p", "1.5"], "must be a number in (0, 1]"),
    (["--prompt", ""], "argument --prompt: must not be empty (nor only spaces), got ''"),
    (["--prompt", " \t "], "argument --prompt: must not be empty"),
    (["--threads", "0"], "argument --threads: must be a positive integer, got 0"),
])
def test_bad_arguments_are_refused_before_loading(argv, message, capsys, monkeypatch):
    monkeypatch.setattr(chat_model, "load_language_model", None)  # a call would fail the test
    assert cli.main(["chat", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: argument ") and err.count("\n") == 1 and message in err


def test_a_corrupt_file_is_one_line_without_a_traceback(tmp_path):
    path = tmp_path / "cut.gguf"
    path.write_bytes(chat_model.default_model_path().read_bytes()[:3000])
    done = subprocess.run([sys.executable, "-m", "minattn", "chat", "--model", str(path),
                           "--prompt", "hi"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    assert "cut.gguf cannot be read as GGUF" in done.stderr


def _reply_ids(model, messages, n):
    # generate's greedy reply, up to the end-of-turn token (not included)
    ids = np.array([model.tokenizer.encode(model.chat_prompt(messages))])
    out = ma.generate(model.params, ids, n, eos_token_id=model.eos_token_id,
                      **model.config)[0, ids.shape[1]:].tolist()
    return out[:out.index(model.eos_token_id)] if model.eos_token_id in out else out


def test_a_second_turn_reads_only_its_new_tokens_and_answers_as_read_afresh(model, run):
    n = 8
    first = [{"role": "user", "content": "Hi"}]
    reply = _reply_ids(model, first, n)
    second = first + [{"role": "assistant", "content": model.tokenizer.decode(reply)},
                      {"role": "user", "content": QUESTION}]
    code, out, err = run("--max-new-tokens", str(n), lines=["Hi", QUESTION])
    assert code == 0
    assert out == (model.tokenizer.decode(reply) + "\n" +
                   model.tokenizer.decode(_reply_ids(model, second, n)) + "\n")
    # the cache held the first prompt and the reply's tokens as read (the last one of a reply
    # cut at n is never read); the second prompt shares a prefix with them
    held = model.tokenizer.encode(model.chat_prompt(first)) + (reply[:-1] if len(reply) == n
                                                               else reply)
    ids = model.tokenizer.encode(model.chat_prompt(second))
    shared = next(i for i in range(len(ids)) if i == len(held) or held[i] != ids[i])
    assert shared > len(held) // 2
    assert f"[prompt {len(ids)} tokens, {shared} of them cached, read in " in err


def test_a_reply_cut_by_max_new_tokens_is_marked(model, run, monkeypatch):
    ids = model.tokenizer.encode(" one two three")
    monkeypatch.setattr(model, "reply", lambda prompt, n, **k: iter(ids[:n]))
    _, out, err = run("--prompt", "hi", "--max-new-tokens", str(len(ids)))
    assert out == " one two three\n" and f"cut at --max-new-tokens {len(ids)}" in err
    _, out, err = run("--prompt", "hi", "--max-new-tokens", str(len(ids) + 1))  # ended itself
    assert out == " one two three\n" and "cut" not in err


@pytest.mark.parametrize("errors", ["strict", "surrogateescape"])  # a UTF-8 and a C locale
def test_a_piped_line_that_is_not_text_is_refused_with_exit_code_2(model, monkeypatch, capsys,
                                                                    errors):
    monkeypatch.setattr(chat_model, "load_language_model", lambda path=None: model)
    monkeypatch.setattr(model, "reply", lambda *a, **k: iter(model.tokenizer.encode("Yes.")))
    stdin = io.TextIOWrapper(io.BytesIO(b"Hi\ncaf\xe9\nBye\n"), encoding="utf-8",
                             errors=errors)
    monkeypatch.setattr(sys, "stdin", stdin)
    assert cli.main(["chat"]) == 2
    out, err = capsys.readouterr()
    assert out == "Yes.\n"  # the first line answered, nothing after the bad one
    assert err.splitlines()[-1] == "error: input line 2 is not valid utf-8 text, got b'caf\\xe9'"


def test_at_a_terminal_a_line_that_is_not_text_is_refused_and_the_session_goes_on(
        model, run, monkeypatch):
    from minattn.cli import chat

    monkeypatch.setattr(chat, "_interactive", lambda: True)
    seen = []
    monkeypatch.setattr(model, "reply", lambda ids, *a, **k: seen.append(ids) or
                        iter(model.tokenizer.encode("Yes.")))
    bad = b"caf\xe9".decode("utf-8", "surrogateescape")  # as a C locale's stdin hands it over
    code, out, err = run(lines=[bad, "café"])
    assert (code, out) == (0, "Yes.\n")
    assert "error: input line 1 is not valid utf-8 text, got b'caf\\xe9'; type it again" in err
    assert model.tokenizer.decode(seen[0]) == model.chat_prompt([{"role": "user",
                                                                  "content": "café"}])


def test_threads_sets_the_blas_threads_for_the_run_and_restores_them(model, run, monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads():
        return [lib["num_threads"] for lib in threadpoolctl.threadpool_info()
                if lib["user_api"] == "blas"]
    monkeypatch.setattr(model, "reply", lambda *a, **k: during.append(blas_threads()) or iter([]))
    # two threads before the run (under xdist the suite's conftest gives each worker one), so that
    # --threads 1 has something to set and to restore
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        before, during = blas_threads(), []
        if not before:
            pytest.skip("threadpoolctl finds no BLAS library")
        assert run("--prompt", "hi", "--threads", "1")[0] == 0
        assert during == [[1] * len(before)] and blas_threads() == before
