#!/usr/bin/env python3
"""Builds the speculative-decoding workloads in bench/data/spec/ (run once;
the output is committed, nothing is downloaded). Every text here is written
for this project or is ingot's own source code.

  code-edit   one of our own C files + an instruction; the answer is the
              whole edited file (output repeats the prompt: drafts shine)
  summarize   a self-written report full of quotations, summarized with the
              key sentences quoted verbatim
  agentic     multi-turn agent sessions: tool outputs (file listings, test
              logs) that the next turns echo
  chat        open questions with little overlap between prompt and answer
              (the control: speculation must not hurt)

Each line of WORKLOAD.jsonl: {"prompt": str, "max_tokens": int}."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "data", "spec")


def src(name, max_lines=60):
    with open(os.path.join(ROOT, "src", name)) as f:
        return "".join(f.readlines()[:max_lines])


def code_edit():
    edits = [
        ("spec_trie.c", "Rename the function `edge_hash` to `strie_edge_hash` everywhere."),
        ("pool.h", "Add the word `Note:` at the start of the first comment line."),
        ("sbuf.c", "Rename the parameter `b` to `buf` in every function."),
        ("err.c", "Replace every `return` of an error code with the same statement, unchanged, "
                  "and add nothing else."),
    ]
    for name, instr in edits:
        body = src(name)
        yield {"prompt": f"Below is a C source file and an editing instruction. Write out the "
                         f"whole edited file, changing only what the instruction asks.\n\n"
                         f"### File: {name}\n{body}\n### Instruction\n{instr}\n\n"
                         f"### Edited file: {name}\n", "max_tokens": 160}


REPORT = """Harbour Committee, minutes of the spring meeting.

The chair opened by saying: "The north pier is older than any of us, and it is tired." She asked the engineer for his report.

The engineer said: "We found cracks along the third and fourth sections. The cracks are not dangerous yet, but they grow every winter." He added: "If we repair them this summer, the pier will last another twenty years."

The treasurer answered: "We have money for one large project this year, not two." She reminded the committee that the fish market roof was also leaking: "The market roof has been patched four times. Patching it a fifth time is throwing money into the sea."

A fisherman from the public gallery asked to speak. He said: "Without the pier there are no boats, and without boats the market has nothing to sell." Several members agreed.

The chair closed the discussion: "We repair the pier this summer. The market roof waits one more year, and we patch it one last time."
"""


def summarize():
    for style in ("a short summary", "a summary for the town newsletter",
                  "a list of the decisions and who argued for them"):
        yield {"prompt": REPORT + f"\nWrite {style}. Quote the key sentences word for word.\n\n"
                                  "Summary:\n", "max_tokens": 128}


LISTING = """$ ls -l src/
-rw-r--r-- 1 dev dev  4312 engine.c
-rw-r--r-- 1 dev dev  1290 engine.h
-rw-r--r-- 1 dev dev  2210 kv.c
-rw-r--r-- 1 dev dev   930 kv.h
-rw-r--r-- 1 dev dev  3120 sample.c
-rw-r--r-- 1 dev dev   780 sample.h
"""
TESTLOG = """$ make test
PASS release/test_kv                     0.4s
PASS release/test_sample                 0.2s
FAIL release/test_engine                 (log: build/test-logs/release/test_engine.log)
    | test_engine.c:212: CHECK(st.running == 0) failed: running 1 after cancel
PASS py/test_cli                         3.1s
3 passed, 1 failed
"""


def agentic():
    sessions = [
        [("user", "Which files are in src/ and which one is the largest?"),
         ("tool", LISTING),
         ("assistant", "The largest file is engine.c (4312 bytes). The files are engine.c, engine.h, kv.c, kv.h, sample.c and sample.h."),
         ("user", "Run the tests and tell me exactly which check failed.")],
        [("user", "Run the tests."),
         ("tool", TESTLOG),
         ("assistant", "One test failed: release/test_engine, at test_engine.c:212: CHECK(st.running == 0) failed: running 1 after cancel."),
         ("user", "Show me the listing of src/ again and repeat the failing check."),
         ("tool", LISTING)],
    ]
    for turns in sessions:
        text = "You are a coding agent. You run tools and report their output precisely.\n\n"
        for role, content in turns:
            text += f"[{role}]\n{content.strip()}\n\n"
        yield {"prompt": text + "[assistant]\n", "max_tokens": 128}


def chat():
    for q in ("Why do cats purr?", "What would you pack for a week of hiking in the rain?",
              "Explain in simple words how a refrigerator keeps food cold.",
              "Write a short poem about a lighthouse."):
        yield {"prompt": f"Question: {q}\nAnswer:", "max_tokens": 128}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, gen in [("code-edit", code_edit), ("summarize", summarize),
                      ("agentic", agentic), ("chat", chat)]:
        with open(os.path.join(OUT, name + ".jsonl"), "w") as f:
            for item in gen():
                f.write(json.dumps(item) + "\n")


if __name__ == "__main__":
    main()
