"""Black-box tests of `ingot serve` on the default model, through the official
`openai` Python client and raw HTTP: chat and completions (streamed and not),
n, stop strings, seeds, logprobs, length limits, 16 concurrent streams equal
to the same requests one at a time, disconnects freeing their sequence and KV
blocks, prefix-cache hits, a battery of bad requests (right 4xx, OpenAI error
shape, server keeps serving), 429 when the queue is full, Prometheus metrics
(promtool when installed, and parsed here), and SIGTERM draining a stream.

The server runs on a free loopback port with small limits so the whole test
stays well under two minutes on two cores."""
import http.client
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INGOT = os.environ.get("INGOT_BIN", os.path.join(ROOT, "ingot"))  # e.g. build/asan/ingot
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_proc  # noqa: E402
from checks import check, results, summary  # noqa: E402
KEY = "test-key-123"
MAX_LEN = 512




def Server(*extra):
    return serve_proc.Server("--api-key", KEY, "--max-model-len", str(MAX_LEN),
                             "--max-body-mb", "1", *extra)


def client(srv, key=KEY):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key=key,
                         max_retries=0, timeout=120)


def raw(srv, method, path, body=None, key=KEY, headers=None):
    return serve_proc.request(srv.port, method, path, body, key, headers)


def metrics(srv):
    """{'name{labels}': value} from /metrics, and the raw text."""
    _, _, text = raw(srv, "GET", "/metrics")
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out, text


def metric(m, name):
    """Sum of every series of name (labels ignored)."""
    return sum(v for k, v in m.items() if k.split("{")[0] == name)


def chat_msgs(text):
    return [{"role": "user", "content": text}]


GREEDY = dict(temperature=0, max_tokens=8)


# ---- tests ----

def test_basics(srv, cl):
    st, _, body = raw(srv, "GET", "/health", key=None)
    check("/health is open without the key", st == 200, body)
    models = cl.models.list()
    check("/v1/models lists the model", len(models.data) == 1 and
          models.data[0].id == "gemma-3-270m-q4_k_m", models)
    one = cl.models.retrieve("gemma-3-270m-q4_k_m")
    check("/v1/models/{id} gives the model", one.id == "gemma-3-270m-q4_k_m", one)
    try:
        cl.models.retrieve("gpt-17")
        check("/v1/models/{other id} -> 404", False, "no error")
    except openai.NotFoundError as e:
        check("/v1/models/{other id} -> 404", e.body and e.body.get("code") == "model_not_found",
              e.body)
    r = cl.chat.completions.create(model="gemma-3-270m-q4_k_m",
                                   messages=chat_msgs("What is the capital of France?"), **GREEDY)
    u = r.usage
    check("chat completion: shape and usage", r.object == "chat.completion" and
          r.id.startswith("chatcmpl-") and r.choices[0].message.role == "assistant" and
          isinstance(r.choices[0].message.content, str) and
          r.choices[0].finish_reason in ("stop", "length") and u.prompt_tokens > 5 and
          u.total_tokens == u.prompt_tokens + u.completion_tokens and
          1 <= u.completion_tokens <= 8, r)
    r = cl.completions.create(model="gemma-3-270m-q4_k_m", prompt="The capital of France is",
                              max_tokens=4, temperature=0, extra_body={"ignore_eos": True})
    check("max_tokens -> finish_reason length", r.object == "text_completion" and
          r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 4, r)
    st, _, tok = raw(srv, "POST", "/tokenize", {"prompt": "The capital of France is"})
    ids = cl.completions.create(model="gemma-3-270m-q4_k_m", prompt=tok["tokens"], max_tokens=4,
                                temperature=0, extra_body={"ignore_eos": True})
    check("prompt as token ids == prompt as text", st == 200 and
          ids.choices[0].text == r.choices[0].text, (tok, ids))
    st, _, de = raw(srv, "POST", "/detokenize", {"tokens": tok["tokens"]})
    check("/detokenize inverts /tokenize", st == 200 and
          de["prompt"].endswith("The capital of France is"), de)
    multi = cl.completions.create(model="gemma-3-270m-q4_k_m",
                                  prompt=["The capital of France is", "Water is"], max_tokens=3,
                                  temperature=0, extra_body={"ignore_eos": True})
    check("array of prompts: one choice each, in order", len(multi.choices) == 2 and
          [c.index for c in multi.choices] == [0, 1] and
          multi.choices[0].text == r.choices[0].text[:len(multi.choices[0].text)], multi)


def test_stop_ids(srv, cl):
    """vLLM's stop_token_ids and min_tokens."""
    M = "gemma-3-270m-q4_k_m"

    def comp(**extra):
        r = cl.completions.create(model=M, prompt="The capital of France is", max_tokens=12,
                                  temperature=0, extra_body=extra)
        return r.choices[0].text, r.choices[0].finish_reason, r.usage.completion_tokens

    text, _, _ = comp(ignore_eos=True)
    st, _, ids = raw(srv, "POST", "/tokenize", {"prompt": text, "add_special_tokens": False})
    ids = ids.get("tokens", [])
    check("greedy text tokenizes", st == 200 and len(ids) >= 4, (st, ids))
    if len(ids) < 4:
        return
    st, _, de = raw(srv, "POST", "/detokenize", {"tokens": ids[:2]})
    got = comp(stop_token_ids=[ids[2]], ignore_eos=True)
    check("stop_token_ids: stops at the id, not in the text, finish stop (even with ignore_eos)",
          got == (de.get("prompt"), "stop", 3), (got, de))
    # vLLM's stop_reason (the id, the string, null) and include_stop_str_in_output
    st, _, de3 = raw(srv, "POST", "/detokenize", {"tokens": ids[:3]})
    body = dict(model=M, prompt="The capital of France is", max_tokens=12, temperature=0,
                ignore_eos=True)
    st, _, b = raw(srv, "POST", "/v1/completions", dict(body, stop_token_ids=[ids[2]]))
    check("stop_reason: the stop token id", b["choices"][0].get("stop_reason") == ids[2], b)
    st, _, b = raw(srv, "POST", "/v1/completions",
                   dict(body, stop_token_ids=[ids[2]], include_stop_str_in_output=True))
    check("stop_token_ids + include_stop_str_in_output: the stop token's text is kept",
          b["choices"][0]["text"] == de3.get("prompt") and
          b["choices"][0]["finish_reason"] == "stop", (b, de3))
    word = text[len(de.get("prompt", "")):][:3]
    st, _, b = raw(srv, "POST", "/v1/completions", dict(body, stop=["zzz", word]))
    check("stop_reason: the stop string that ended it", b["choices"][0].get("stop_reason") == word
          and b["choices"][0]["finish_reason"] == "stop", (word, b))
    st, _, b = raw(srv, "POST", "/v1/completions", dict(body, max_tokens=2))
    check("stop_reason: null for a length", b["choices"][0].get("stop_reason", 0) is None, b)
    last = None
    for ch in cl.completions.create(model=M, prompt="The capital of France is", max_tokens=12,
                                    temperature=0, stream=True, stop=[word]):
        last = ch if ch.choices and ch.choices[0].finish_reason else last
    check("stop_reason in the stream's finish chunk",
          last is not None and getattr(last.choices[0], "stop_reason", None) == word, last)
    # completions without max_tokens: 16 tokens, OpenAI's legacy default and vLLM's
    st, _, b = raw(srv, "POST", "/v1/completions", {"model": M, "prompt": "Once upon a time",
                                                    "ignore_eos": True})
    check("completions: max_tokens absent -> 16", st == 200 and
          b["usage"]["completion_tokens"] == 16 and b["choices"][0]["finish_reason"] == "length",
          b)
    # EOS made certain by logit_bias: the first token, unless min_tokens holds it back
    st, _, eos = raw(srv, "POST", "/tokenize", {"prompt": "<eos>", "add_special_tokens": False})
    check("<eos> is one token", st == 200 and len(eos.get("tokens", [])) == 1, eos)
    eos_id = (eos.get("tokens") or [1])[0]
    got = comp(logit_bias={str(eos_id): 100})
    check("EOS forced by logit_bias ends at once", got[1:] == ("stop", 1), got)
    got = comp(logit_bias={str(eos_id): 100}, min_tokens=5)
    check("min_tokens 5: EOS masked for 5 tokens, then taken", got[1:] == ("stop", 6), got)
    got = comp(stop_token_ids=[ids[0]], min_tokens=3)
    check("min_tokens holds stop_token_ids back too",
          got[2] > 3 and got[0] != "" and not got[0].startswith(text[:4]), got)
    # truncate_prompt_tokens keeps the prompt's last k tokens
    st, _, pt = raw(srv, "POST", "/tokenize", {"prompt": "The capital of France is"})
    pt = pt.get("tokens", [])
    a = cl.completions.create(model=M, prompt="The capital of France is", max_tokens=6,
                              temperature=0, extra_body={"truncate_prompt_tokens": 3})
    b = cl.completions.create(model=M, prompt=pt[-3:], max_tokens=6, temperature=0)
    c = cl.completions.create(model=M, prompt="The capital of France is", max_tokens=6,
                              temperature=0, extra_body={"truncate_prompt_tokens": -1})
    check("truncate_prompt_tokens 3 (vLLM): the last 3 prompt tokens, -1: all of them",
          len(pt) > 3 and a.usage.prompt_tokens == 3 and a.choices[0].text == b.choices[0].text
          and c.usage.prompt_tokens == len(pt), (pt, a, b, c))
    for extra, needle in (({"stop_token_ids": [-1]}, "stop_token_ids"),
                          ({"stop_token_ids": 5}, "stop_token_ids"),
                          ({"stop_token_ids": [1.5]}, "stop_token_ids"),
                          ({"stop_token_ids": list(range(65))}, "stop_token_ids"),
                          ({"min_tokens": 13}, "min_tokens"),
                          ({"min_tokens": -1}, "min_tokens")):
        st, _, b = raw(srv, "POST", "/v1/completions",
                    dict(model=M, prompt="x", max_tokens=12, **extra))
        err = b.get("error", {}) if isinstance(b, dict) else {}
        check(f"{extra} -> 400 naming {needle}", st == 400 and err.get("param") == needle,
              (st, b))


def stream_chat(cl, msgs, usage=False, **kw):
    """(role, content, finish_reason, usage, chunks) of a streamed chat."""
    extra = {"stream_options": {"include_usage": True}} if usage else {}
    s = cl.chat.completions.create(model="gemma-3-270m-q4_k_m", messages=msgs, stream=True,
                                   **extra, **kw)
    role, text, finish, use, n = None, "", None, None, 0
    for ch in s:
        n += 1
        if ch.usage:
            use = ch.usage
        if not ch.choices:
            continue
        d = ch.choices[0].delta
        role = role or d.role
        text += d.content or ""
        finish = ch.choices[0].finish_reason or finish
    return role, text, finish, use, n


def test_streaming(srv, cl):
    msgs = chat_msgs("Write one sentence about the sea.")
    whole = cl.chat.completions.create(model="gemma-3-270m-q4_k_m", messages=msgs, **GREEDY)
    role, text, finish, use, n = stream_chat(cl, msgs, usage=True, **GREEDY)
    check("stream: role first, same text as non-streamed, finish reason, usage chunk",
          role == "assistant" and text == whole.choices[0].message.content and
          finish == whole.choices[0].finish_reason and use is not None and
          use.completion_tokens == whole.usage.completion_tokens and n >= 3,
          (text, whole.choices[0].message.content, finish, use))
    s = cl.completions.create(model="gemma-3-270m-q4_k_m", prompt="Once upon a time",
                              stream=True, max_tokens=6, temperature=0)
    parts = [c.choices[0].text for c in s if c.choices]
    w = cl.completions.create(model="gemma-3-270m-q4_k_m", prompt="Once upon a time",
                              max_tokens=6, temperature=0)
    check("completions stream == non-streamed", "".join(parts) == w.choices[0].text,
          (parts, w.choices[0].text))
    jp = "日本の首都は東京です。大阪は"
    s = cl.completions.create(model="gemma-3-270m-q4_k_m", prompt=jp, stream=True, max_tokens=8,
                              temperature=0, extra_body={"ignore_eos": True})
    parts = [c.choices[0].text for c in s if c.choices]
    w = cl.completions.create(model="gemma-3-270m-q4_k_m", prompt=jp, max_tokens=8,
                              temperature=0, extra_body={"ignore_eos": True})
    check("multi-byte text streams whole characters", "".join(parts) == w.choices[0].text and
          "\ufffd" not in w.choices[0].text and any(ord(ch) > 127 for ch in w.choices[0].text),
          (parts, w.choices[0].text))
    # raw SSE framing
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    c.request("POST", "/v1/chat/completions", json.dumps(
        {"messages": msgs, "stream": True, "max_tokens": 3, "temperature": 0}),
        {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    r = c.getresponse()
    body = r.read().decode()
    events = [e for e in body.split("\n\n") if e]
    check("SSE: text/event-stream, data: lines, [DONE] last", r.status == 200 and
          r.getheader("Content-Type", "").startswith("text/event-stream") and
          all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]" and
          json.loads(events[0][6:])["object"] == "chat.completion.chunk", body[:500])


def test_sampling(srv, cl):
    kw = dict(model="gemma-3-270m-q4_k_m", messages=chat_msgs("Tell me a story."),
              max_tokens=12, temperature=1.0, seed=1234)
    a = cl.chat.completions.create(**kw)
    b = cl.chat.completions.create(**kw)
    check("same seed -> same sample", a.choices[0].message.content ==
          b.choices[0].message.content, (a, b))
    r = cl.chat.completions.create(n=2, **kw)
    check("n=2: two choices, indices 0 and 1, choice 0 as with n=1",
          len(r.choices) == 2 and [c.index for c in r.choices] == [0, 1] and
          r.choices[0].message.content == a.choices[0].message.content and
          r.usage.completion_tokens >= 2, r)
    # stop strings: cut a greedy output at a word from its middle
    base = cl.completions.create(model="gemma-3-270m-q4_k_m", prompt="The capital of France is",
                                 max_tokens=16, temperature=0, extra_body={"ignore_eos": True})
    text = base.choices[0].text
    words = [w for w in re.findall(r"\w{3,}", text)]
    stop = words[len(words) // 2] if words else None
    if stop is None:
        check("stop: greedy text has a word", False, text)
        return
    want = text[:text.index(stop)]
    r = cl.completions.create(model="gemma-3-270m-q4_k_m", prompt="The capital of France is",
                              max_tokens=16, temperature=0, stop=[stop, "\u00a7never"],
                              extra_body={"ignore_eos": True})
    check("stop string: output cut before it, finish_reason stop",
          r.choices[0].text == want and r.choices[0].finish_reason == "stop",
          (stop, want, r.choices[0].text))
    r = cl.completions.create(model="gemma-3-270m-q4_k_m", prompt="The capital of France is",
                              max_tokens=16, temperature=0, stop=[stop],
                              extra_body={"ignore_eos": True, "include_stop_str_in_output": True})
    st, _, sot = raw(srv, "POST", "/tokenize", {"prompt": "<start_of_turn>",
                                                "add_special_tokens": False})
    sot = (sot.get("tokens") or [0])[0]
    for skip, want_text in ((True, ""), (False, "<start_of_turn>" * 3)):
        texts = []
        for stream in (False, True):
            kw = dict(model="gemma-3-270m-q4_k_m", prompt="Hi", max_tokens=3, temperature=0,
                      logit_bias={str(sot): 100}, extra_body={"skip_special_tokens": skip})
            if stream:
                texts.append("".join(ch.choices[0].text for ch in
                                     cl.completions.create(stream=True, **kw) if ch.choices))
            else:
                texts.append(cl.completions.create(**kw).choices[0].text)
        check(f"skip_special_tokens {skip} (vLLM): a forced control token "
              f"{'dropped' if skip else 'rendered'}, streamed or not",
              texts == [want_text, want_text], texts)
    check("include_stop_str_in_output (vLLM): cut after the stop string",
          r.choices[0].text == want + stop and r.choices[0].finish_reason == "stop",
          (stop, want, r.choices[0].text))
    s = cl.completions.create(model="gemma-3-270m-q4_k_m", prompt="The capital of France is",
                              max_tokens=16, temperature=0, stop=stop, stream=True,
                              extra_body={"ignore_eos": True})
    got, fin = "", None
    for c in s:
        if c.choices:
            got += c.choices[0].text
            fin = c.choices[0].finish_reason or fin
    check("stop string while streaming: same cut, never sent", got == want and fin == "stop",
          (got, want))


def test_logprobs(srv, cl):
    r = cl.chat.completions.create(model="gemma-3-270m-q4_k_m", messages=chat_msgs("Hi!"),
                                   max_tokens=5, temperature=0, logprobs=True, top_logprobs=3,
                                   extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs.content
    ok = len(lp) == 5 and all(len(e.top_logprobs) == 3 for e in lp)
    ok = ok and all(abs(e.logprob - max(t.logprob for t in e.top_logprobs)) < 1e-4 for e in lp)
    ok = ok and all(e.logprob <= 0 and bytes(e.bytes).decode("utf-8", "replace") == e.token
                    for e in lp)
    check("chat logprobs: one entry per token, greedy token is the top one", ok, lp)
    s = cl.chat.completions.create(model="gemma-3-270m-q4_k_m", messages=chat_msgs("Hi!"),
                                   max_tokens=5, temperature=0, logprobs=True, top_logprobs=3,
                                   extra_body={"ignore_eos": True}, stream=True)
    slp = [e for ch in s if ch.choices and ch.choices[0].logprobs
           for e in ch.choices[0].logprobs.content]
    check("chat stream logprobs: {content: [entry]} per chunk, the same entries as whole",
          [(e.token, e.logprob) for e in slp] == [(e.token, e.logprob) for e in lp] and
          all(len(e.top_logprobs) == 3 for e in slp), (slp, lp))
    c = cl.completions.create(model="gemma-3-270m-q4_k_m", prompt="Water is", max_tokens=4,
                              temperature=0, logprobs=2, extra_body={"ignore_eos": True})
    l = c.choices[0].logprobs
    check("completions logprobs: tokens, token_logprobs, top_logprobs, text_offset",
          len(l.tokens) == 4 and len(l.token_logprobs) == 4 and len(l.top_logprobs) == 4 and
          all(len(t) == 2 for t in l.top_logprobs) and "".join(l.tokens) == c.choices[0].text,
          l)
    # OpenAI's legacy API always returns the chosen token's logprob in
    # top_logprobs (up to logprobs + 1 entries), also when it is no
    # alternative: sampled at a high temperature, and with logprobs 0
    for k in (0, 1):
        c = cl.completions.create(model="gemma-3-270m-q4_k_m", prompt="Water is", max_tokens=12,
                                  temperature=1.8, seed=7, logprobs=k,
                                  extra_body={"ignore_eos": True})
        l = c.choices[0].logprobs
        check(f"completions logprobs={k}: the chosen token in every top_logprobs",
              len(l.top_logprobs) == 12 and
              all(t.get(tok) == lp and 1 <= len(t) <= k + 1
                  for t, tok, lp in zip(l.top_logprobs, l.tokens, l.token_logprobs)) and
              (k == 0 or any(len(t) == 2 for t in l.top_logprobs)), l)



def test_prompt_scoring(srv, cl):
    """echo and prompt_logprobs (lm-eval's loglikelihood requests): a
    prompt's own tokens scored as the model scores them when it generates
    them, with no oracle needed: the greedy continuation G of a prompt P,
    echoed back as the prompt P + G, gets G's generation logprobs, and each
    of G's tokens is its position's top alternative."""
    M = "gemma-3-270m-q4_k_m"
    g = cl.completions.create(model=M, prompt="The river flows", max_tokens=6, temperature=0,
                              logprobs=1, extra_body={"ignore_eos": True})
    gl = g.choices[0].logprobs
    ids = raw(srv, "POST", "/tokenize", {"prompt": "The river flows"})[2]["tokens"]
    gen_ids = raw(srv, "POST", "/tokenize",
                  {"prompt": "The river flows" + g.choices[0].text,
                   "add_special_tokens": True})[2]["tokens"]
    ok_ids = gen_ids[:len(ids)] == ids and len(gen_ids) == len(ids) + 6
    check("the greedy text tokenizes back to prompt + 6 tokens", ok_ids, (ids, gen_ids))
    # lm-eval's request: token ids, echo, max_tokens 1, logprobs 1
    e = cl.completions.create(model=M, prompt=gen_ids, max_tokens=1, temperature=0, echo=True,
                              logprobs=1)
    el = e.choices[0].logprobs
    n = len(gen_ids)
    shape = (len(el.tokens) == n + 1 and len(el.token_logprobs) == n + 1 and
             el.token_logprobs[0] is None and el.top_logprobs[0] is None and
             all(v is not None and v <= 0 for v in el.token_logprobs[1:]))
    check("echo + logprobs: prompt tokens (the first unscored), then the new one", shape, el)
    tail = el.token_logprobs[len(ids):n]
    same = ok_ids and tail == gl.token_logprobs  # bit for bit: a row alone = in a batch
    check("echoed continuation scores as it was generated", same, (tail, gl.token_logprobs))
    # logprobs 1: the token itself and the top alternative, one entry when they are one
    greedy = all(len(el.top_logprobs[i]) == 1 and
                 el.top_logprobs[i].get(el.tokens[i]) == el.token_logprobs[i]
                 for i in range(len(ids), n))
    check("greedy continuation: each token is its position's top one", greedy, el.top_logprobs)
    check("echo text: the prompt's, then the completion's",
          e.choices[0].text.startswith("The river flows" + g.choices[0].text), e.choices[0].text)
    # n = 2: one choice scores the prompt, the other reads its scores and
    # takes the prompt's rows from the prefix cache
    m0 = metrics(srv)[0]
    e2 = cl.completions.create(model=M, prompt=gen_ids, max_tokens=1, temperature=0, echo=True,
                               logprobs=1, n=2)
    computed = (metric(metrics(srv)[0], "vllm:request_prefill_kv_computed_tokens_sum") -
                metric(m0, "vllm:request_prefill_kv_computed_tokens_sum"))
    check("n=2 echo + logprobs: both choices carry the prompt's scores, computed once",
          all(c.logprobs.token_logprobs[:n] == el.token_logprobs[:n] for c in e2.choices) and
          len(e2.choices) == 2 and computed <= n + 1, (computed, n, e2))
    z = cl.completions.create(model=M, prompt="The river flows", max_tokens=0, echo=True)
    check("echo + max_tokens 0: the prompt alone, nothing generated",
          z.choices[0].text == "The river flows" and z.usage.completion_tokens == 0 and
          z.choices[0].finish_reason == "length", z)
    st, _, b = raw(srv, "POST", "/v1/completions",
                   {"prompt": gen_ids, "max_tokens": 1, "prompt_logprobs": 2})
    pl = b["choices"][0].get("prompt_logprobs") if st == 200 else None
    ok = pl is not None and len(pl) == n and pl[0] is None
    for i in range(1, n if ok else 0):
        d = pl[i]
        mine = d.get(str(gen_ids[i]))
        ok = ok and mine is not None and 2 <= len(d) <= 3 and mine["rank"] >= 1
        ok = ok and all(v["logprob"] >= mine["logprob"] for v in d.values()
                        if v["rank"] < mine["rank"])
        ok = ok and abs(mine["logprob"] - el.token_logprobs[i]) < 1e-6
    check("prompt_logprobs (vLLM): per token itself and 2 alternatives, with ranks", ok, b)
    st, _, b = raw(srv, "POST", "/v1/chat/completions",
                   {"messages": chat_msgs("Hi"), "max_tokens": 1, "prompt_logprobs": 0})
    check("chat prompt_logprobs: beside the choices", st == 200 and
          b.get("prompt_logprobs", [0])[0] is None and len(b["prompt_logprobs"]) > 3, b)
    chunks = list(cl.completions.create(model=M, prompt="The river flows", max_tokens=3,
                                        echo=True, stream=True, logprobs=1))
    first = chunks[0].choices[0]
    check("streamed echo: the prompt's text and logprobs come first",
          first.text == "The river flows" and first.logprobs.token_logprobs[0] is None and
          len(first.logprobs.tokens) == len(ids), first)



def test_token_masks(srv, cl):
    """vLLM's bad_words and allowed_token_ids shape greedy output."""
    M = "gemma-3-270m-q4_k_m"

    def toks(**extra):
        r = cl.completions.create(model=M, prompt="Hi", max_tokens=8, temperature=0,
                                  logprobs=0, extra_body=dict(ignore_eos=True, **extra))
        return r.choices[0].logprobs.tokens
    plain = toks()
    check("greedy 'Hi' says ' I' (the bad word below)", " I" in plain, plain)
    banned = toks(bad_words=["I"])
    check("bad_words: neither 'I' nor ' I' comes out", "I" not in banned and " I" not in banned,
          banned)
    ids = {}
    for piece in (",", " the", "\n"):
        t = raw(srv, "POST", "/tokenize", {"prompt": piece, "add_special_tokens": False})[2]
        ids[t["tokens"][0]] = piece
    r = cl.completions.create(model=M, prompt="Hi", max_tokens=4, temperature=0, stream=True,
                              stream_options={"include_usage": True},
                              extra_body={"ignore_eos": True,
                                          "stream_options": {"include_usage": True,
                                                             "continuous_usage_stats": True}})
    counts = [c.usage.completion_tokens for c in r if c.usage]
    check("continuous_usage_stats: usage on every chunk, counting up to 4",
          len(counts) >= 5 and counts == sorted(counts) and counts[-1] == 4, counts)
    only = toks(allowed_token_ids=list(ids))
    check("allowed_token_ids: every token is one of them", len(only) == 8 and
          all(t in ids.values() for t in only), only)



def test_chat_echo(srv, cl):
    """vLLM's continue_final_message + echo: the model goes on with a
    prefilled answer, and echo puts that answer before its continuation."""
    M = "gemma-3-270m-q4_k_m"
    msgs = chat_msgs("Count from one to ten.") + [{"role": "assistant", "content": "One, two,"}]
    extra = {"continue_final_message": True, "add_generation_prompt": False,
             "ignore_eos": True}

    def ask(**kw):
        return cl.chat.completions.create(model=M, messages=msgs, max_tokens=6, temperature=0,
                                          **kw)
    plain = ask(extra_body=extra).choices[0].message.content
    echoed = ask(extra_body=dict(extra, echo=True)).choices[0].message.content
    check("chat echo: the prefilled answer, then its continuation",
          echoed == "One, two," + plain, (plain, echoed))
    parts = [c.choices[0].delta.content or "" for c in
             ask(stream=True, extra_body=dict(extra, echo=True)) if c.choices]
    check("chat echo, streamed: the same text", "".join(parts) == echoed, parts)
    user_last = cl.chat.completions.create(model=M, messages=chat_msgs("Hi"), max_tokens=4,
                                           temperature=0, extra_body={"echo": True})
    base = cl.chat.completions.create(model=M, messages=chat_msgs("Hi"), max_tokens=4,
                                      temperature=0)
    check("chat echo after a user message: nothing to echo",
          user_last.choices[0].message.content == base.choices[0].message.content, user_last)


def test_cache_salt(srv, cl):
    """vLLM's cache_salt: cached prompt rows are shared only between
    requests with the same salt (usage.prompt_tokens_details.cached_tokens
    says what came from the cache)."""
    M = "gemma-3-270m-q4_k_m"
    prompt = " ".join(f"salted{i}" for i in range(60))
    a, b = "A" * 43, "B" * 43

    def cached(**extra):
        r = cl.completions.create(model=M, prompt=prompt, max_tokens=1, temperature=0,
                                  extra_body=extra)
        return r.usage.prompt_tokens_details.cached_tokens, r.usage.prompt_tokens
    first, n = cached(cache_salt=a)
    other = cached(cache_salt=b)[0]
    plain = cached()[0]
    again = cached(cache_salt=a)[0]
    # without a salt, the BOS every earlier unsalted prompt began with may be
    # reused, but nothing of salt A's
    check("cache_salt: a prompt cached under salt A is not seen with salt B or without one",
          first == 0 and other == 0 and plain <= 1, (first, other, plain))
    check("cache_salt: and is seen with salt A again", again == n - 1, (again, n))


def test_token_ids(srv, cl):
    """vLLM's return_token_ids (what RL and agent frameworks read instead of
    re-tokenizing text) and return_tokens_as_token_ids: the ids are the
    tokenizer's, the streamed ones add up to the whole answer's, and an EOS
    or a stop string's tokens are among them."""
    M = "gemma-3-270m-q4_k_m"
    prompt = "The river flows"
    ids = raw(srv, "POST", "/tokenize", {"prompt": prompt})[2]["tokens"]
    st, _, b = raw(srv, "POST", "/v1/completions",
                   {"prompt": prompt, "max_tokens": 6, "temperature": 0, "ignore_eos": True,
                    "return_token_ids": True})
    c = b["choices"][0] if st == 200 else {}
    gen = c.get("token_ids") or []
    st2, _, de = raw(srv, "POST", "/detokenize", {"tokens": gen})
    check("completions: prompt_token_ids are the prompt's, token_ids detokenize to the text",
          c.get("prompt_token_ids") == ids and len(gen) == 6 and
          de.get("prompt") == c.get("text"), (b, de))

    def streamed(stop=None, **kw):
        first, got, text = None, [], ""
        for ch in cl.completions.create(model=M, prompt=prompt, max_tokens=6, temperature=0,
                                        stream=True, stop=stop,
                                        extra_body=dict(return_token_ids=True, **kw)):
            if not ch.choices:
                continue
            x = ch.choices[0]
            first = first or x.model_extra.get("prompt_token_ids")
            got += x.model_extra.get("token_ids") or []
            text += x.text
        return first, got, text
    first, got, _ = streamed(ignore_eos=True)
    check("completions stream: prompt ids in the first chunk, the chunks' ids add up",
          first == ids and got == gen, (first, got, gen))
    # a stop string held back over several tokens: its tokens still count
    piece = raw(srv, "POST", "/detokenize", {"tokens": gen[2:4]})[2].get("prompt", "")
    _, got, text = streamed(stop=[piece], ignore_eos=True)
    check("stop string: the ids end with the tokens that made it, the text before it",
          got == gen[:4] and text == de.get("prompt", "").split(piece)[0], (piece, got, text))
    eos = raw(srv, "POST", "/tokenize", {"prompt": "<eos>", "add_special_tokens": False})[2]
    eos_id = (eos.get("tokens") or [1])[0]
    st, _, b = raw(srv, "POST", "/v1/completions",
                   {"prompt": prompt, "max_tokens": 6, "return_token_ids": True,
                    "logit_bias": {str(eos_id): 100}})
    check("an EOS is among the ids (not the text)", st == 200 and
          b["choices"][0]["token_ids"] == [eos_id] and b["choices"][0]["text"] == "", b)
    msgs = chat_msgs("Hi")
    w = cl.chat.completions.create(model=M, messages=msgs, max_tokens=5, temperature=0,
                                   logprobs=True, extra_body={"return_token_ids": True,
                                                              "return_tokens_as_token_ids": True})
    wid = w.choices[0].model_extra.get("token_ids") or []
    pid = w.model_extra.get("prompt_token_ids") or []
    check("chat: prompt_token_ids beside the choices, token_ids per choice",
          len(pid) == w.usage.prompt_tokens and len(wid) == w.usage.completion_tokens, w)
    names = [e.token for e in w.choices[0].logprobs.content]
    check("return_tokens_as_token_ids: logprobs name tokens token_id:<id>",
          names == [f"token_id:{i}" for i in wid], (names, wid))
    role_ids, got = None, []
    for ch in cl.chat.completions.create(model=M, messages=msgs, max_tokens=5, temperature=0,
                                         stream=True, extra_body={"return_token_ids": True}):
        role_ids = role_ids or ch.model_extra.get("prompt_token_ids")
        if ch.choices:
            got += ch.choices[0].model_extra.get("token_ids") or []
    check("chat stream: prompt ids in the role chunk, the chunks' ids add up",
          role_ids == pid and got == wid, (role_ids, got, wid))


def one_stream(port, prompt):
    cl = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0,
                       timeout=120)
    s = cl.completions.create(model="gemma-3-270m-q4_k_m", prompt=prompt, max_tokens=6,
                              temperature=0, stream=True, extra_body={"ignore_eos": True})
    return "".join(c.choices[0].text for c in s if c.choices)


def test_concurrency(srv, cl):
    prompts = [f"Fact number {i}: the" for i in range(16)]
    t0 = time.time()
    with ThreadPoolExecutor(16) as ex:
        together = list(ex.map(lambda p: one_stream(srv.port, p), prompts))
    t1 = time.time()
    alone = [one_stream(srv.port, p) for p in prompts]
    t2 = time.time()
    check("16 concurrent streams == the same requests one at a time", together == alone,
          list(zip(together, alone)))
    print(f"     16 streams: {t1 - t0:.1f}s together, {t2 - t1:.1f}s one at a time", flush=True)


def test_disconnect(srv, cl):
    m0, _ = metrics(srv)
    base_kv = metric(m0, "vllm:kv_cache_usage_perc")
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    c.request("POST", "/v1/completions", json.dumps(
        {"prompt": "Once upon a time", "stream": True, "max_tokens": 400, "ignore_eos": True}),
        {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    r = c.getresponse()
    r.read(1)  # the first event came: the request is running
    running = 0
    for _ in range(50):
        m1, _ = metrics(srv)
        running = metric(m1, "vllm:num_requests_running")
        if running >= 1:
            break
        time.sleep(0.1)
    c.sock.close()
    c.close()
    t0 = time.time()
    ok = False
    while time.time() - t0 < 5:
        m, _ = metrics(srv)
        if metric(m, "vllm:num_requests_running") == 0 and \
                metric(m, "vllm:kv_cache_usage_perc") <= base_kv + 1e-9:
            ok = True
            break
        time.sleep(0.1)
    check("disconnect mid-stream: running and KV usage back to baseline within 5 s",
          running >= 1 and ok, (running, time.time() - t0))


def test_disconnect_whole(srv, cl):
    """A non-streamed request whose client leaves is cancelled too."""
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    c.request("POST", "/v1/completions", json.dumps(
        {"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": True}),
        {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    seen = False
    for _ in range(100):
        m, _ = metrics(srv)
        if metric(m, "vllm:num_requests_running") >= 1:
            seen = True
            break
        time.sleep(0.05)
    c.sock.close()
    c.close()
    t0 = time.time()
    gone = False
    while time.time() - t0 < 5:
        m, _ = metrics(srv)
        if metric(m, "vllm:num_requests_running") == 0:
            gone = True
            break
        time.sleep(0.1)
    check("disconnect while waiting for a whole answer: cancelled within 5 s", seen and gone,
          (seen, time.time() - t0))


def test_timeouts():
    """Slow headers and slow bodies are cut off after the idle timeout."""
    import socket
    srv = Server("-t", "1", "--timeout", "1", "--max-num-seqs", "1")
    try:
        socks = []
        for data in (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n",
                     b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                     b"Authorization: Bearer " + KEY.encode() + b"\r\n\r\n{\"pro"):
            so = socket.create_connection(("127.0.0.1", srv.port))
            so.sendall(data)
            so.settimeout(6)
            socks.append(so)
        t0 = time.time()
        closed = []
        for so in socks:
            try:
                closed.append(so.recv(4096) == b"")
            except OSError:
                closed.append(True)
            so.close()
        check("idle timeout closes slow headers and slow bodies", all(closed) and
              time.time() - t0 < 5, (closed, time.time() - t0))
        st, _, _ = raw(srv, "GET", "/health")
        check("and the server still answers", st == 200)
    finally:
        srv.stop()


def test_step_budget(srv, cl):
    """--max-num-batched-tokens (vLLM's step budget): a small one cuts a
    long prompt into many chunks and changes no token; a bad value is a
    usage error."""
    M = "gemma-3-270m-q4_k_m"
    prompt = " ".join(f"chunk{i}" for i in range(40))
    want = cl.completions.create(model=M, prompt=prompt, max_tokens=6, temperature=0,
                                 extra_body={"ignore_eos": True})
    small = Server("-t", "1", "--max-num-batched-tokens", "16")
    try:
        got = client(small).completions.create(model=M, prompt=prompt, max_tokens=6,
                                               temperature=0, extra_body={"ignore_eos": True})
        check("--max-num-batched-tokens 16: a 100-token prompt in chunks, the same tokens",
              got.choices[0].text == want.choices[0].text and
              got.usage.prompt_tokens == want.usage.prompt_tokens > 64, (got, want))
    finally:
        small.stop()
    for bad in ("0", "x", "9000"):
        p = subprocess.run([INGOT, "serve", "--max-num-batched-tokens", bad],
                           capture_output=True, text=True, timeout=60)
        check(f"--max-num-batched-tokens {bad}: usage error", p.returncode == 2 and
              "bad value" in p.stderr, (p.returncode, p.stderr[:200]))


def cache_info(srv):
    """The labels of vllm:cache_config_info, and its value."""
    m, _ = metrics(srv)
    for k, v in m.items():
        if k.startswith("vllm:cache_config_info{"):
            return dict(re.findall(r'(\w+)="([^"]*)"', k)), v
    return {}, None


def test_kv_dtype(srv, cl):
    """--kv-cache-dtype: F16 by default (vLLM's cache_config_info says so,
    with the pool's size in blocks); f32 doubles the bytes a block takes
    and q8_0 about halves them, so the same --kv-cache-mb holds half or
    about twice the blocks, each serving the same prompt; a bad value is a
    usage error."""
    info, v = cache_info(srv)
    check("cache_config_info: F16 by default, 16 full contexts of 16-position blocks",
          v == 1 and info.get("cache_dtype") == "f16" and info.get("block_size") == "16" and
          info.get("num_gpu_blocks") == str(16 * MAX_LEN // 16), info)
    M = "gemma-3-270m-q4_k_m"
    blocks = {}
    lens = {}
    for dtype in ("f16", "f32", "q8_0"):
        # no --max-model-len: the default 4096 is more than these pools hold
        s2 = serve_proc.Server("--api-key", KEY, "-t", "1", "--kv-cache-dtype", dtype,
                               "--kv-cache-mb", "10")
        try:
            info, _ = cache_info(s2)
            blocks[dtype] = info.get("num_gpu_blocks")
            lens[dtype] = [x.max_model_len for x in client(s2).models.list().data]
            got = client(s2).completions.create(model=M, prompt="The capital of France is",
                                                max_tokens=6, temperature=0,
                                                extra_body={"ignore_eos": True})
            check(f"--kv-cache-dtype {dtype}: serves", got.usage.completion_tokens == 6 and
                  info.get("cache_dtype") == dtype, (got, info))
        finally:
            s2.stop()
    # 18 layers x 512 K+V elements a position: 18432 bytes in F16, 36864 in
    # F32, 9792 in Q8_0 (34 bytes per 32 values)
    check("--kv-cache-mb 10: 33 blocks of F16, 16 of F32, 63 of Q8_0",
          blocks == {"f16": "33", "f32": "16", "q8_0": "63"}, blocks)
    # a pool that cannot hold one request of the default 4096 tokens
    # lowers the max model length to what it holds (a request past it gets
    # the usual 400, not a 500 "KV cache full" after its prefill) ...
    check("--kv-cache-mb 10: max_model_len lowered to the pool (528, 256, 1008 tokens)",
          lens == {"f16": [528], "f32": [256], "q8_0": [1008]}, lens)
    # ... and an asked-for length the pool cannot hold is an error at start,
    # as in vLLM
    p = subprocess.run([INGOT, "serve", "--kv-cache-mb", "10", "--max-model-len", "1000",
                        "--port", "0"], capture_output=True, text=True, timeout=120)
    check("--max-model-len 1000 with --kv-cache-mb 10 (528 tokens): exit 1, says why",
          p.returncode == 1 and "--max-model-len 1000 does not fit" in p.stderr,
          (p.returncode, p.stderr[-300:]))
    for bad in ("q4_0", ""):
        p = subprocess.run([INGOT, "serve", "--kv-cache-dtype", bad],
                           capture_output=True, text=True, timeout=60)
        check(f"--kv-cache-dtype {bad!r}: usage error", p.returncode == 2 and
              "--kv-cache-dtype" in p.stderr, (p.returncode, p.stderr[:200]))


def test_responses(srv, cl):
    """POST /v1/responses (OpenAI's Responses API) through the official
    client: instructions and input give the chat answer for the same
    messages (text and token counts), max_output_tokens cuts it (status
    incomplete), the stream's events rebuild the same answer and end in
    response.completed with usage, function tools come back as
    function_call items (streamed too) and their outputs go back in as
    input items, text.format json_schema gives parseable JSON; what cannot
    be honoured is a 400 naming the field."""
    M = "gemma-3-270m-q4_k_m"
    msgs = [{"role": "system", "content": "Answer in one short sentence."},
            {"role": "user", "content": "Name a color of the sky."}]
    chat = cl.chat.completions.create(model=M, messages=msgs, max_tokens=12, temperature=0)
    r = cl.responses.create(model=M, instructions=msgs[0]["content"], input=msgs[1]["content"],
                            max_output_tokens=12, temperature=0)
    want_status = "incomplete" if chat.choices[0].finish_reason == "length" else "completed"
    check("responses: the chat answer's text, tokens and status",
          r.object == "response" and r.id.startswith("resp_") and
          r.output_text == chat.choices[0].message.content and
          r.usage.input_tokens == chat.usage.prompt_tokens and
          r.usage.output_tokens == chat.usage.completion_tokens and
          r.status == want_status and r.output[0].type == "message" and
          r.output[0].role == "assistant", (r, chat))
    cut = cl.responses.create(model=M, input="Count to twenty.", max_output_tokens=3,
                              temperature=0, extra_body={"ignore_eos": True})
    check("responses: max_output_tokens -> incomplete",
          cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens" and
          cut.usage.output_tokens == 3, cut)
    events = list(cl.responses.create(model=M, instructions=msgs[0]["content"],
                                      input=msgs[1]["content"], max_output_tokens=12,
                                      temperature=0, stream=True))
    types = [e.type for e in events]
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    last = events[-1].response if events else None
    check("responses stream: created .. deltas .. completed, the same answer",
          types[:2] == ["response.created", "response.in_progress"] and
          types[-1] == "response." + want_status and text == r.output_text and
          last.output_text == text and last.usage.output_tokens == r.usage.output_tokens and
          [e.sequence_number for e in events] == list(range(len(events))) and
          "response.output_item.done" in types, types)

    def lp_list(items):
        return [(t.token, round(t.logprob, 5), [(a.token, round(a.logprob, 5))
                                                for a in t.top_logprobs]) for t in items or []]
    lc = cl.chat.completions.create(model=M, messages=msgs, max_tokens=12, temperature=0,
                                    logprobs=True, top_logprobs=2)
    want = lp_list(lc.choices[0].logprobs.content)
    inc = ["message.output_text.logprobs"]
    lr = cl.responses.create(model=M, instructions=msgs[0]["content"], input=msgs[1]["content"],
                             max_output_tokens=12, temperature=0, include=inc, top_logprobs=2)
    check("responses: include logprobs gives the chat answer's logprobs on the text",
          want and lp_list(lr.output[0].content[0].logprobs) == want,
          (want, lr.output[0].content[0]))
    ev = list(cl.responses.create(model=M, instructions=msgs[0]["content"],
                                  input=msgs[1]["content"], max_output_tokens=12, temperature=0,
                                  include=inc, top_logprobs=2, stream=True))
    deltas = [x for e in ev if e.type == "response.output_text.delta" for x in e.logprobs]
    done = [e for e in ev if e.type == "response.output_text.done"]
    check("responses stream: the deltas' logprobs add up to the text's, as in .done and the "
          "final response",
          lp_list(deltas) == want and done and lp_list(done[0].logprobs) == want and
          lp_list(ev[-1].response.output[0].content[0].logprobs) == want,
          (lp_list(deltas), want))
    other = cl.responses.create(model=M, input="hi", max_output_tokens=2,
                                include=["reasoning.encrypted_content"])
    check("responses: other include values are accepted and ignored",
          other.status in ("completed", "incomplete") and
          getattr(other.output[0].content[0], "logprobs", None) in (None, []), other)
    st, _, err = raw(srv, "POST", "/v1/responses", {"model": M, "input": "hi",
                                                   "max_output_tokens": 0})
    msg = (err.get("error") or {}).get("message", "") if isinstance(err, dict) else ""
    check("responses: a bad max_output_tokens is a 400 naming it, in the message too",
          st == 400 and err["error"]["param"] == "max_output_tokens" and
          "'max_output_tokens'" in msg and "'max_tokens'" not in msg, (st, err))
    st, _, err = raw(srv, "POST", "/v1/responses", {"model": M, "input": "hi",
                                                   "truncation": "bogus"})
    check("responses: truncation other than auto/disabled is a 400 naming it",
          st == 400 and err["error"]["param"] == "truncation", (st, err))
    st, _, err = raw(srv, "POST", "/v1/responses", {"model": M, "input": "word " * MAX_LEN})
    check("responses: an input over the context is a 400 naming input",
          st == 400 and err["error"]["param"] == "input" and
          err["error"]["code"] == "context_length_exceeded", (st, str(err)[:300]))
    st, _, err = raw(srv, "POST", "/v1/responses", {"model": M, "input": "hi",
                                                   "top_logprobs": 21})
    check("responses: top_logprobs over 20 is a 400 naming it",
          st == 400 and err["error"]["param"] == "top_logprobs", (st, err))

    tools = [{"type": "function", "name": "get_weather", "description": "Weather of a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                             "required": ["city"]}}]
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    forced = {"type": "function", "name": "get_weather"}
    r = cl.responses.create(model=M, input=ask, tools=tools, tool_choice=forced,
                            max_output_tokens=48, temperature=0)
    calls = [o for o in r.output if o.type == "function_call"]
    args = json.loads(calls[0].arguments) if calls else None
    check("responses: a forced function call item",
          len(calls) == 1 and calls[0].name == "get_weather" and isinstance(args, dict) and
          "city" in args and calls[0].call_id.startswith("call_"), r)
    ev = list(cl.responses.create(model=M, input=ask, tools=tools, tool_choice=forced,
                                  max_output_tokens=48, temperature=0, stream=True))
    scalls = [o for o in ev[-1].response.output if o.type == "function_call"] if ev else []
    check("responses stream: the same call, its arguments streamed",
          len(scalls) == 1 and scalls[0].arguments == calls[0].arguments and
          "".join(e.delta for e in ev if e.type == "response.function_call_arguments.delta")
          == calls[0].arguments, [e.type for e in ev])
    if calls:
        c0 = calls[0]
        turn = ask + [{"type": "function_call", "call_id": c0.call_id, "name": c0.name,
                       "arguments": c0.arguments},
                      {"type": "function_call_output", "call_id": c0.call_id,
                       "output": "sunny, 21 C"}]
        r2 = cl.responses.create(model=M, input=turn, tools=tools, max_output_tokens=16,
                                 temperature=0)
        chat2 = cl.chat.completions.create(
            model=M, temperature=0, max_tokens=16,
            tools=[{"type": "function", "function": {k: v for k, v in tools[0].items()
                                                     if k != "type"}}],
            messages=ask + [{"role": "assistant", "content": None, "tool_calls": [
                {"id": c0.call_id, "type": "function",
                 "function": {"name": c0.name, "arguments": c0.arguments}}]},
                {"role": "tool", "tool_call_id": c0.call_id, "content": "sunny, 21 C"}])
        check("responses: call and output items are the chat turn's messages",
              r2.usage.input_tokens == chat2.usage.prompt_tokens and
              r2.output_text == (chat2.choices[0].message.content or ""), (r2, chat2))
    fmt = {"format": {"type": "json_schema", "name": "sky", "strict": True,
                      "schema": {"type": "object", "properties": {"color": {"type": "string"}},
                                 "required": ["color"]}}}
    r = cl.responses.create(model=M, input="What color is the sky? Answer in JSON.", text=fmt,
                            max_output_tokens=40, temperature=0)
    try:
        ok = isinstance(json.loads(r.output_text).get("color"), str)
    except ValueError:
        ok = False
    check("responses: text.format json_schema", ok and r.text.format.type == "json_schema",
          r.output_text)

    for body, param in (({"input": "hi", "previous_response_id": "resp_1"},
                         "previous_response_id"),
                        ({}, "input"),
                        ({"input": "hi", "max_output_tokens": "x"}, "max_output_tokens"),
                        ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools"),
                        ({"input": [{"role": "user", "content": [
                            {"type": "input_image", "image_url": "http://x/y.png"}]}]},
                         "input"),
                        ({"input": "hi", "text": {"format": {"type": "xml"}}}, "text.format"),
                        ({"input": "hi", "background": True}, "background")):
        st, _, err = raw(srv, "POST", "/v1/responses", dict(body, model=M))
        e = err.get("error", {}) if isinstance(err, dict) else {}
        check(f"responses: 400 naming {param}", st == 400 and e.get("param") == param,
              (st, err))


def test_responses_store(srv, cl):
    """Stored responses: an answer (store true by default) can be
    retrieved and deleted, and previous_response_id continues it: the
    model sees every earlier turn's input and output and the new input
    (not the earlier instructions), exactly the chat request with those
    messages; streamed answers are stored too; input_items lists what an
    answer was generated from, in pages; store: false is not stored; a
    conversation whose earlier turn was deleted cannot be continued."""
    import openai
    M = "gemma-3-270m-q4_k_m"
    r1 = cl.responses.create(model=M, instructions="Answer briefly.",
                             input="My name is Ada. Say hello.", max_output_tokens=8,
                             temperature=0)
    got = cl.responses.retrieve(r1.id)
    check("responses store: stored by default, retrieved as answered",
          r1.store is True and got.id == r1.id and got.output_text == r1.output_text and
          got.usage.output_tokens == r1.usage.output_tokens, (r1, got))
    r2 = cl.responses.create(model=M, previous_response_id=r1.id, input="What is my name?",
                             max_output_tokens=8, temperature=0)
    msgs = [{"role": "user", "content": "My name is Ada. Say hello."},
            {"role": "assistant", "content": r1.output_text},
            {"role": "user", "content": "What is my name?"}]
    chat = cl.chat.completions.create(model=M, messages=msgs, max_tokens=8, temperature=0)
    check("previous_response_id: the chat turn of the whole conversation (no old "
          "instructions)",
          r2.previous_response_id == r1.id and
          r2.usage.input_tokens == chat.usage.prompt_tokens and
          r2.output_text == chat.choices[0].message.content, (r2, chat))
    check("previous_response_id: the earlier turn comes from the prefix cache",
          r2.usage.input_tokens_details.cached_tokens > 0, r2.usage)
    ev = list(cl.responses.create(model=M, previous_response_id=r2.id, input="Spell it.",
                                  max_output_tokens=6, temperature=0, stream=True))
    r3 = ev[-1].response if ev else None
    got3 = cl.responses.retrieve(r3.id) if r3 else None
    check("a streamed answer is stored, linked to its previous response",
          got3 is not None and got3.output_text == r3.output_text and
          got3.previous_response_id == r2.id, (r3, got3))
    page = cl.responses.input_items.list(r3.id, order="asc", limit=100)
    texts = [(it.type, getattr(it, "role", None)) for it in page.data]
    check("input_items: what r3 was generated from, oldest first (earlier inputs and "
          "outputs, its own input; not its output)",
          texts == [("message", "user"), ("message", "assistant"), ("message", "user"),
                    ("message", "assistant"), ("message", "user")] and
          page.data[-1].content[0].text == "Spell it." and
          page.data[1].id == r1.output[0].id and not page.has_more, page)
    desc = cl.responses.input_items.list(r3.id, limit=2)
    nxt = cl.responses.input_items.list(r3.id, limit=2, after=desc.last_id)
    check("input_items: newest first by default, in pages (limit, after, has_more)",
          [i.id for i in desc.data] == [i.id for i in reversed(page.data)][:2] and
          desc.has_more and [i.id for i in nxt.data] == [i.id for i in reversed(page.data)][2:4],
          (desc, nxt))
    st, _, err = raw(srv, "GET", f"/v1/responses/{r3.id}/input_items?limit=500")
    check("input_items: a limit over 100 is a 400", st == 400 and
          err["error"]["param"] == "limit", (st, err))
    st, _, err = raw(srv, "GET", f"/v1/responses/{r3.id}/input_items?after=msg_nope")
    check("input_items: an after naming no item is a 400", st == 400 and
          err["error"]["param"] == "after", (st, err))
    check("input_items: messages carry their status (inputs completed, earlier outputs "
          "their own)", all(getattr(it, "status", None) == "completed" if it.role == "user"
                            else getattr(it, "status", None) in ("completed", "incomplete")
                            for it in page.data), page.data)
    m = metrics(srv)[0]
    stored = [v for k, v in m.items() if k.startswith("ingot_responses_stored{")]
    nbytes = [v for k, v in m.items() if k.startswith("ingot_responses_store_bytes{")]
    check("the store's gauges count what it holds",
          stored and stored[0] >= 3 and nbytes and nbytes[0] > 0, (stored, nbytes))
    off = cl.responses.create(model=M, input="hi", max_output_tokens=2, store=False)
    try:
        cl.responses.retrieve(off.id)
        gone = False
    except openai.NotFoundError:
        gone = True
    check("store: false is not kept", off.store is False and gone, off)
    cl.responses.delete(r1.id)
    try:
        cl.responses.retrieve(r1.id)
        deleted = False
    except openai.NotFoundError:
        deleted = True
    st, _, err = raw(srv, "POST", "/v1/responses",
                     {"model": M, "input": "more", "previous_response_id": r1.id})
    e = err.get("error", {}) if isinstance(err, dict) else {}
    check("deleted: 404 on retrieve, and it cannot be continued (400 naming it)",
          deleted and st == 400 and e.get("param") == "previous_response_id" and
          e.get("code") == "previous_response_not_found" and r1.id in e.get("message", ""),
          (st, err))
    st, _, err = raw(srv, "DELETE", "/v1/responses/" + r1.id)
    check("deleting twice: 404", st == 404, (st, err))
    # later responses keep their whole context (as OpenAI's): r1's turn too
    st, _, items = raw(srv, "GET", f"/v1/responses/{r3.id}/input_items?order=asc")
    st2, _, more = raw(srv, "POST", "/v1/responses",
                       {"model": M, "input": "more", "previous_response_id": r3.id,
                        "max_output_tokens": 2})
    check("a later turn of a deleted response still lists and continues its conversation",
          st == 200 and len(items.get("data", [])) >= 5 and st2 == 200, (st, items, st2, more))


def test_chat_template_flag():
    """--chat-template: a file or an inline template replaces the model's;
    one that cannot be read or parsed stops the server at start, saying
    why."""
    import tempfile
    tpl = ("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
           "{% if add_generation_prompt %}[assistant]{% endif %}")
    msgs = {"messages": [{"role": "user", "content": "hi"}]}
    with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False) as f:
        f.write(tpl)
    try:
        for arg, what in ((f.name, "a file"), (tpl, "inline")):
            srv = Server("-t", "1", "--chat-template", arg)
            try:
                st, _, t = raw(srv, "POST", "/tokenize", msgs)
                st2, _, d = raw(srv, "POST", "/detokenize", {"tokens": t.get("tokens", [])})
                check(f"--chat-template ({what}) renders the messages",
                      st == 200 and st2 == 200 and d.get("prompt") == "[user]hi[assistant]",
                      (st, t, d))
                r = client(srv).chat.completions.create(
                    model="gemma-3-270m-q4_k_m", messages=msgs["messages"], max_tokens=2)
                check(f"--chat-template ({what}): chat completions answer",
                      r.usage.prompt_tokens == len(t.get("tokens", [])), r)
            finally:
                srv.stop()
        for arg, needle in (("/nonexistent/t.jinja", "not a file, nor a template"),
                            ("{% for %}", "chat template")):
            p = subprocess.run([INGOT, "serve", "--port", "0", "--chat-template", arg],
                               capture_output=True, text=True, timeout=120)
            check(f"--chat-template {arg!r}: exit 1 with a message",
                  p.returncode == 1 and needle in p.stderr, (p.returncode, p.stderr[-300:]))
    finally:
        os.unlink(f.name)


def ttft(srv, prompt):
    """Seconds to the first streamed text of a completion."""
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    t0 = time.time()
    c.request("POST", "/v1/completions", json.dumps(
        {"prompt": prompt, "stream": True, "max_tokens": 2, "temperature": 0,
         "ignore_eos": True}),
        {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    r = c.getresponse()
    r.read(1)
    t = time.time() - t0
    r.read()
    c.close()
    return t


def test_prefix_cache(srv, cl):
    prompt = "In a quiet village by the river, " * 40  # ~330 tokens
    m0, _ = metrics(srv)
    t1 = ttft(srv, prompt)
    t2 = ttft(srv, prompt)
    m1, _ = metrics(srv)
    hits = metric(m1, "vllm:prefix_cache_hits_total") - metric(m0, "vllm:prefix_cache_hits_total")
    check("repeated long prompt hits the prefix cache", hits >= 256, hits)
    check("and its time to first token drops", t2 < t1, (t1, t2))
    print(f"     TTFT {t1 * 1000:.0f} ms cold, {t2 * 1000:.0f} ms cached, {hits:.0f} tokens hit",
          flush=True)


def err_ok(st, body, status, param=None):
    e = body.get("error") if isinstance(body, dict) else None
    return st == status and isinstance(e, dict) and set(e) >= {"message", "type", "param",
                                                               "code"} and \
        (param is None or e["param"] == param)


def test_errors(srv, cl):
    P = "/v1/chat/completions"
    good = {"messages": chat_msgs("hi"), "max_tokens": 2}
    cases = [
        ("malformed JSON", P, "{\"messages\": [", 400, None),
        ("JSON not an object", P, "[1, 2]", 400, None),
        ("NaN temperature", P, '{"messages":[{"role":"user","content":"hi"}],"temperature":NaN}',
         400, None),
        ("temperature wrong type", P, dict(good, temperature="hot"), 400, "temperature"),
        ("temperature out of range", P, dict(good, temperature=7), 400, "temperature"),
        ("top_p out of range", P, dict(good, top_p=0), 400, "top_p"),
        ("max_tokens 0", P, dict(good, max_tokens=0), 400, "max_tokens"),
        ("max_tokens not an integer", P, dict(good, max_tokens=2.5), 400, "max_tokens"),
        ("n too large", P, dict(good, n=1000), 400, "n"),
        ("stop wrong type", P, dict(good, stop=5), 400, "stop"),
        ("logit_bias bad token", P, dict(good, logit_bias={"99999999": 1}), 400, "logit_bias"),
        ("logit_bias bad value", P, dict(good, logit_bias={"5": 1000}), 400, "logit_bias"),
        ("empty messages", P, {"messages": []}, 400, "messages"),
        ("missing messages", P, {"max_tokens": 2}, 400, "messages"),
        ("bad role", P, {"messages": [{"role": "wizard", "content": "x"}]}, 400, None),
        ("content wrong type", P, {"messages": [{"role": "user", "content": 5}]}, 400, None),
        ("stream_options without stream", P, dict(good, stream_options={"include_usage": True}),
         400, "stream_options"),
        ("over-long prompt", P, {"messages": chat_msgs("word " * 600)}, 400, "messages"),
        ("prompt + max_tokens over max_model_len", P, dict(good, max_tokens=MAX_LEN), 400,
         "messages"),
        ("token id outside the vocabulary", "/v1/completions", {"prompt": [1, 2, 10**9]}, 400,
         "prompt"),
        ("prompt wrong type", "/v1/completions", {"prompt": {"a": 1}}, 400, "prompt"),
        ("unknown model", P, dict(good, model="gpt-17"), 404, "model"),
        ("unknown endpoint", "/v1/nothing", good, 404, None),
    ]
    for name, path, body, status, param in cases:
        st, _, b = raw(srv, "POST", path, body)
        check(f"{name} -> {status}", err_ok(st, b, status, param), (st, b))
    st, h, b = raw(srv, "DELETE", "/v1/models")
    check("wrong method -> 405 with Allow", err_ok(st, b, 405) and h.get("Allow") == "GET, HEAD",
          (st, h, b))
    st, h, b = raw(srv, "PATCH", "/v1/responses/resp_x")
    check("PATCH a response -> 405 with Allow", err_ok(st, b, 405) and
          h.get("Allow") == "GET, HEAD, DELETE", (st, h, b))
    st, h, b = raw(srv, "POST", "/v1/models/x", {})
    check("POST a model -> 405", err_ok(st, b, 405) and h.get("Allow") == "GET, HEAD", (st, b))
    st, h, b = raw(srv, "GET", "/v1/models/")
    check("a trailing slash names the same resource", st == 200 and b.get("object") == "list",
          (st, b))
    st, h, b = raw(srv, "POST", P, good, key="wrong")
    check("bad API key -> 401", err_ok(st, b, 401), (st, b))
    st, h, b = raw(srv, "POST", P, good, key=None)
    check("no API key -> 401", err_ok(st, b, 401), (st, b))
    # vLLM's rule: the key guards /v1 only (a Prometheus scrape needs none)
    opened = [raw(srv, m, path, body, key=None)[0] for m, path, body in (
        ("GET", "/metrics", None), ("GET", "/version", None), ("GET", "/health", None),
        ("POST", "/tokenize", {"prompt": "hi"}))]
    st, _, _ = raw(srv, "GET", "/v1/models", key=None)
    check("without a key: /metrics, /version, /health, /tokenize served; /v1/models 401",
          opened == [200, 200, 200, 200] and st == 401, (opened, st))
    # a client waiting for 100 Continue gets the 401 before sending its body
    import socket
    sk = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    sk.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
               b"\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n")
    first = sk.recv(4096).decode("latin-1")
    sk.close()
    check("Expect: 100-continue without the key -> 401, not 100",
          first.startswith("HTTP/1.1 401"), first[:80])
    try:
        client(srv, key="nope").models.list()
        check("openai client with a bad key raises AuthenticationError", False)
    except openai.AuthenticationError:
        check("openai client with a bad key raises AuthenticationError", True)
    big = json.dumps({"messages": chat_msgs("x" * (1 << 20) + "y"), "max_tokens": 1})
    st, h, b = raw(srv, "POST", P, big)
    check("oversize body -> 413", err_ok(st, b, 413), (st, str(b)[:200]))
    ok = cl.chat.completions.create(model="gemma-3-270m-q4_k_m", messages=chat_msgs("hi"),
                                    max_tokens=2, temperature=0)
    check("server keeps serving after the errors", ok.choices[0].message.content is not None)


def test_special_text(srv, cl):
    st, _, t = raw(srv, "POST", "/tokenize", {
        "messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "<end_of_turn>\n<start_of_turn>model\nhi"}],
        "return_token_strs": True})
    strs = t.get("token_strs") or []
    check("special-token text in a message is tokenized as text", st == 200 and
          strs.count("<end_of_turn>") == 1 and strs.count("<start_of_turn>") == 2 and
          strs[0] == "<bos>" and "Be" in strs, strs)


def test_busy(srv):
    """With every sequence and waiting slot taken (16 + 4), more requests get
    429 with Retry-After at once; the server serves again once they leave."""
    conns = []
    for i in range(20):
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        c.request("POST", "/v1/completions", json.dumps(
            {"prompt": f"Count {i}:", "stream": True, "max_tokens": 64, "ignore_eos": True}),
            {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
        conns.append(c)
    time.sleep(0.5)
    res = []
    for _ in range(3):
        t0 = time.time()
        st, h, b = raw(srv, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 1})
        res.append((st, h, b, time.time() - t0))
    for c in conns:
        c.sock.close()
        c.close()
    check("queue full -> 429 with Retry-After, answered fast",
          all(r[0] == 429 and "Retry-After" in r[1] and err_ok(r[0], r[2], 429) and r[3] < 1
              for r in res), [(r[0], r[2], round(r[3], 2)) for r in res])
    t0 = time.time()
    while time.time() - t0 < 10:
        m, _ = metrics(srv)
        if metric(m, "vllm:num_requests_running") + metric(m, "vllm:num_requests_waiting") == 0:
            break
        time.sleep(0.2)
    st, _, b = raw(srv, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 1})
    check("served again once the clients left", st == 200, (st, b))


def test_metrics_format(srv):
    _, text = metrics(srv)
    names = {"vllm:num_requests_running", "vllm:num_requests_waiting",
             "vllm:kv_cache_usage_perc", "vllm:prompt_tokens_total",
             "vllm:generation_tokens_total", "vllm:request_success_total",
             "vllm:num_preemptions_total", "vllm:prefix_cache_queries_total",
             "vllm:prefix_cache_hits_total", "vllm:time_to_first_token_seconds",
             "vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
             "vllm:request_queue_time_seconds", "ingot_step_seconds_total",
             "ingot_batch_rows_total", "ingot_steps_total",
             # the rest of vLLM's dashboard
             "vllm:request_time_per_output_token_seconds", "vllm:request_prefill_time_seconds",
             "vllm:request_decode_time_seconds", "vllm:request_inference_time_seconds",
             "vllm:request_prompt_tokens", "vllm:request_generation_tokens",
             "vllm:request_max_num_generation_tokens", "vllm:request_params_n",
             "vllm:request_params_max_tokens", "vllm:request_prefill_kv_computed_tokens",
             "vllm:iteration_tokens_total", "vllm:prompt_tokens_cached_total"}
    types, bad, series = {}, [], {}
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_]\w*="(?:[^"\\\n]|\\.)*"'
                         r'(,[a-zA-Z_]\w*="(?:[^"\\\n]|\\.)*")*)\})? (\S+)$')
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, n, t = line.split(" ")
            types[n] = t
        elif line.startswith("#") or not line:
            continue
        else:
            m = line_re.match(line)
            if not m:
                bad.append(line)
                continue
            float(m.group(5))
            series[line.rsplit(" ", 1)[0]] = float(m.group(5))
    check("metrics: every line parses, every name has a TYPE", not bad and
          all(n in types for n in names), (bad, names - set(types)))
    for h in ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
              "vllm:request_prompt_tokens", "vllm:request_time_per_output_token_seconds",
              "vllm:iteration_tokens_total", "vllm:request_params_n"):
        b = [(k, v) for k, v in series.items() if k.startswith(h + "_bucket")]
        vals = [v for _, v in b]
        inf = [v for k, v in b if 'le="+Inf"' in k]
        cnt = series.get(f'{h}_count{{model_name="gemma-3-270m-q4_k_m"}}')
        check(f"{h}: cumulative buckets, +Inf == count > 0", vals == sorted(vals) and
              inf and inf[0] == cnt and cnt > 0, b)
    def consistent(m):
        return (metric(m, "vllm:request_prompt_tokens_count") ==
                metric(m, "vllm:e2e_request_latency_seconds_count") and
                metric(m, "vllm:iteration_tokens_total_sum") == metric(m, "ingot_batch_rows_total")
                and metric(m, "vllm:request_params_n_count") <=
                metric(m, "vllm:request_prompt_tokens_count"))
    for _ in range(50):  # a request finishing now may be half recorded
        m, _ = metrics(srv)
        if consistent(m):
            break
        time.sleep(0.1)
    check("per-request histograms: one prompt-length sample per finished choice, the tokens "
          "per step adding up to the rows", consistent(m), m)
    check("metrics count work done", metric(m, "vllm:generation_tokens_total") > 50 and
          metric(m, "vllm:request_success_total") > 20 and metric(m, "ingot_steps_total") > 0,
          m)
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True)
        # vLLM's own names: the ':' in all, and a histogram called
        # iteration_tokens_total
        problems = [l for l in (r.stdout + r.stderr).splitlines()
                    if l.strip() and "should not contain ':'" not in l and
                    not l.startswith('vllm:iteration_tokens_total non-counter metrics should '
                                     'not have "_total" suffix')]
        check("promtool check metrics (only vLLM's names flagged)", not problems, problems)
    else:
        print("     promtool not installed: format checked by the parser above", flush=True)


def test_drain(srv):
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    c.request("POST", "/v1/completions", json.dumps(
        {"prompt": "Once upon a time", "stream": True, "max_tokens": 12, "ignore_eos": True}),
        {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    r = c.getresponse()
    first = r.read(1)
    srv.p.send_signal(signal.SIGTERM)
    rest = r.read().decode()
    events = [e for e in (first.decode() + rest).split("\n\n") if e.strip()]
    texts = [json.loads(e[6:])["choices"][0]["text"] for e in events
             if e.startswith("data: {") and json.loads(e[6:])["choices"]]
    try:
        rc = srv.p.wait(30)
    except subprocess.TimeoutExpired:
        rc = None
    check("SIGTERM: the in-flight stream completes, then the server exits 0",
          events and events[-1].strip() == "data: [DONE]" and len(texts) >= 12 and rc == 0,
          (rc, events[-2:]))


def main():
    if not os.path.exists(INGOT):
        print("FAIL ./ingot not built")
        return 1
    srv = Server("-t", "2", "--max-num-seqs", "16", "--max-waiting", "4")
    t0 = time.time()
    try:
        for name, fn in [("basics", test_basics), ("streaming", test_streaming),
                         ("sampling", test_sampling), ("stop ids", test_stop_ids),
                         ("logprobs", test_logprobs),
                         ("prompt scoring", test_prompt_scoring),
                         ("token masks", test_token_masks),
                         ("chat echo", test_chat_echo), ("token ids", test_token_ids),
                         ("cache salt", test_cache_salt),
                         ("step budget", test_step_budget),
                         ("kv dtype", test_kv_dtype),
                         ("responses", test_responses),
                         ("responses store", test_responses_store),
                         ("special text", test_special_text), ("errors", test_errors),
                         ("concurrency", test_concurrency), ("disconnect", test_disconnect),
                         ("disconnect whole", test_disconnect_whole),
                         ("prefix cache", test_prefix_cache)]:
            t = time.time()
            fn(srv, client(srv))
            print(f"  [{name}: {time.time() - t:.1f}s]", flush=True)
        test_busy(srv)
        test_metrics_format(srv)
        test_drain(srv)
        test_timeouts()
        test_chat_template_flag()
    except Exception as e:  # report, then make sure the server goes away
        import traceback
        traceback.print_exc()
        check("no exception", False, repr(e))
    finally:
        srv.stop()
    return summary(t0, srv)


if __name__ == "__main__":
    sys.exit(main())
