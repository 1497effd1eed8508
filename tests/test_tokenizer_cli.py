#!/usr/bin/env python3
"""Black-box test of `ingot tokenize` against llama.cpp's conformance data.

For every vocabulary in testdata/vocab, each case of NAME.gguf.inp is fed
on stdin exactly as given and must print exactly the ids of the matching
line of NAME.gguf.out (space-separated, one line). A sample also goes
through -p TEXT. --special must add BOS/EOS as the metadata says and parse
special-token text. Prints "N passed, M failed"; exits 1 on any failure.
Run from the repository root (tests/run.sh does).
"""
import concurrent.futures
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INGOT = os.path.join(ROOT, "ingot")
TESTDATA = os.environ.get("INGOT_TESTDATA") or os.path.join(ROOT, "..", "shared", "testdata")
VOCAB = os.path.join(TESTDATA, "vocab")
SEP = b"\n__ggml_vocab_test__\n"

passed = 0
failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        if failed <= 40:
            print("FAIL:", what)


def tokenize(vocab, text=None, stdin=b"", special=False):
    """Runs ingot tokenize; returns (exit code, list of ids or None, stderr)."""
    cmd = [INGOT, "tokenize", "-m", vocab]
    if text is not None:
        cmd += ["-p", text]
    if special:
        cmd.append("--special")
    p = subprocess.run(cmd, input=stdin, capture_output=True, timeout=120)
    out = p.stdout.decode("ascii", "replace")
    ids = None
    if p.returncode == 0 and out.endswith("\n") and out.count("\n") == 1:
        try:
            ids = [int(x) for x in out.split()]
        except ValueError:
            ids = None
    return p.returncode, ids, p.stderr.decode("utf-8", "replace").strip()


def load_cases(name):
    with open(os.path.join(VOCAB, name + ".inp"), "rb") as f:
        inp = f.read()
    with open(os.path.join(VOCAB, name + ".out"), "r", encoding="ascii") as f:
        out = f.read().split("\n")
    texts = inp.split(SEP)[:-1]  # the file ends with a separator
    return [(t, [int(x) for x in out[i].split()]) for i, t in enumerate(texts)]


def show(b):
    return repr(b[:60])


def run_stdin_cases(pool, vocabs):
    jobs = []
    for name in vocabs:
        path = os.path.join(VOCAB, name)
        for i, (text, want) in enumerate(load_cases(name)):
            jobs.append((name, i, text, want, pool.submit(tokenize, path, None, text)))
    for name, i, text, want, fut in jobs:
        rc, ids, err = fut.result()
        check(rc == 0 and ids == want,
              f"{name} case {i} stdin {show(text)}: want {want}, got {ids} (rc {rc}) {err}")


def run_prompt_cases(pool, vocabs):
    """-p takes an argument string: no NUL bytes, valid UTF-8 here."""
    jobs = []
    for name in vocabs:
        path = os.path.join(VOCAB, name)
        for i, (text, want) in enumerate(load_cases(name)):
            if b"\0" in text:
                continue
            s = text.decode("utf-8", "surrogateescape")
            jobs.append((name, i, text, want, pool.submit(tokenize, path, s)))
    for name, i, text, want, fut in jobs:
        rc, ids, err = fut.result()
        check(rc == 0 and ids == want,
              f"{name} case {i} -p {show(text)}: want {want}, got {ids} (rc {rc}) {err}")


def run_special(vocab, bos, text_with_special, special_id):
    """--special adds BOS (these vocabularies add BOS, not EOS) and parses
    special text; without it the text is plain and nothing is added."""
    rc, plain, err = tokenize(vocab, "Hello world")
    rc2, spec, err2 = tokenize(vocab, "Hello world", special=True)
    check(rc == 0 and rc2 == 0 and plain and spec == [bos] + plain,
          f"{vocab}: --special adds BOS {bos}: plain {plain}, special {spec} {err}{err2}")
    rc, ids, err = tokenize(vocab, text_with_special)
    check(rc == 0 and ids is not None and special_id not in ids,
          f"{vocab}: {text_with_special!r} without --special has no token {special_id}: {ids} {err}")
    rc, ids, err = tokenize(vocab, text_with_special, special=True)
    check(rc == 0 and ids is not None and ids[:2] == [bos, special_id],
          f"{vocab}: {text_with_special!r} with --special starts {bos} {special_id}: {ids} {err}")


def default_model():
    m = os.environ.get("INGOT_MODEL")
    if m:
        return m
    home = os.environ.get("INGOT_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "ingot", "models")
    path = os.path.join(home, "gemma-3-270m-q4_k_m.gguf")
    return path if os.path.exists(path) else None


def main():
    if not os.access(INGOT, os.X_OK):
        check(False, f"{INGOT} not built (run make)")
        print(f"{passed} passed, {failed} failed")
        return 1
    rc, ids, err = tokenize(os.path.join(VOCAB, "ggml-vocab-gpt-2.gguf"), "Hello")
    if ids is None:
        check(False, f"`ingot tokenize` does not work: rc {rc}: {err}")
        print(f"{passed} passed, {failed} failed")
        return 1

    vocabs = sorted(f[: -len(".inp")] for f in os.listdir(VOCAB) if f.endswith(".gguf.inp"))
    check(len(vocabs) >= 6, f"vocabularies found: {vocabs}")
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        run_stdin_cases(pool, vocabs)
        run_prompt_cases(pool, ["ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"])

    run_special(os.path.join(VOCAB, "ggml-vocab-llama-spm.gguf"), 1, "<s>Hello", 1)
    model = default_model()
    if model:
        run_special(model, 2, "<start_of_turn>user\nHi<end_of_turn>", 105)
    else:
        print("note: default model not installed, its --special check skipped")

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
