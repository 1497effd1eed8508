"""Function calling through `ingot serve` and the official `openai` client, on
the default model (built-in template, Hermes-style <tool_call> markup):

- a two-turn round trip: tool_choice names the function, the answer is a
  tool call (id call_..., name, arguments a JSON object in a string,
  finish_reason tool_calls); the call and the tool's result go back as an
  assistant message with tool_calls and a role "tool" message, and the
  second turn answers with text;
- tool_choice "required" with one and with two tools (a call to one of them),
  and several calls where parallel_tool_calls allows (one where it does not);
- streamed tool-call deltas (head, then the arguments piece by piece)
  reassemble to the non-streamed call (greedy);
- streamed logprobs with tools add up to the non-streamed answer's (a
  forced call, and text from tool_choice auto, parts of which the stream
  holds back while a call may start);
- forced calls' arguments start at the object (the SDK's stream helper
  parses them as they come); one cut off by max_tokens is the call so far,
  streamed or not;
- tool_choice "none": no tool markup in the prompt, plain text back;
- parallel_tool_calls false keeps one call;
- bad tools / tool_choice / tool_calls get 400 naming the field.

A 270M base model does not call tools on its own, so calls are forced with
tool_choice (required / named): the call's start is forced and the grammar
holds the arguments to the function's parameters schema."""
import json
import os
import sys
import time

import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_proc  # noqa: E402
from checks import check, results, summary  # noqa: E402

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
MODEL = "gemma-3-270m-q4_k_m"
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]




def call_ok(tc, name):
    try:
        args = json.loads(tc.function.arguments)
    except (TypeError, ValueError):
        return False
    # the grammar holds the arguments to the schema: "city", a string, is required
    return (tc.type == "function" and tc.function.name == name and isinstance(args, dict)
            and isinstance(args.get("city"), str) and set(args) <= {"city"}
            and tc.id.startswith("call_") and len(tc.id) == 29)


def test_round_trip(cl):
    r = cl.chat.completions.create(
        model=MODEL, messages=ASK, tools=[WEATHER, TIME], temperature=0, max_tokens=60,
        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    c = r.choices[0]
    calls = c.message.tool_calls or []
    check("named: one call to get_weather", len(calls) == 1 and call_ok(calls[0], "get_weather"),
          c.message)
    check("named: finish_reason tool_calls", c.finish_reason == "tool_calls", c.finish_reason)
    check("named: no content", not c.message.content, c.message.content)
    if not calls:
        return
    msgs = ASK + [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": calls[0].id, "type": "function",
                         "function": {"name": calls[0].function.name,
                                      "arguments": calls[0].function.arguments}}]},
        {"role": "tool", "tool_call_id": calls[0].id, "content": '{"temp_c": 21, "sky": "clear"}'}]
    r2 = cl.chat.completions.create(model=MODEL, messages=msgs, tools=[WEATHER, TIME],
                                    temperature=0, max_tokens=24, tool_choice="none")
    c2 = r2.choices[0]
    check("second turn answers with text", isinstance(c2.message.content, str) and
          c2.message.content and not c2.message.tool_calls and
          c2.finish_reason in ("stop", "length"), c2)
    r3 = cl.chat.completions.create(model=MODEL, messages=msgs, tools=[WEATHER, TIME],
                                    temperature=0, max_tokens=40)
    c3 = r3.choices[0]
    check("second turn with tool_choice auto: text or another call",
          (c3.finish_reason == "tool_calls" and c3.message.tool_calls) or
          (c3.finish_reason in ("stop", "length") and isinstance(c3.message.content, str)), c3)
    # the call and the result reach the model through the template
    tok = cl.post("/../tokenize", cast_to=object,
                  body={"messages": msgs, "tools": [WEATHER]})
    check("tokenize renders the tool turn", isinstance(tok, dict) and tok.get("count", 0) > 40, tok)


def test_required(cl):
    r = cl.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER], temperature=0,
                                   max_tokens=60, tool_choice="required")
    calls = r.choices[0].message.tool_calls or []
    check("required, one tool: a call", len(calls) == 1 and call_ok(calls[0], "get_weather"),
          r.choices[0].message)
    r = cl.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER, TIME],
                                   temperature=0, max_tokens=60, tool_choice="required",
                                   parallel_tool_calls=False)
    c = r.choices[0]
    calls = c.message.tool_calls or []
    check("required, two tools: a call to one of them", c.finish_reason == "tool_calls" and
          len(calls) == 1 and calls[0].function.name in ("get_weather", "get_time") and
          isinstance(json.loads(calls[0].function.arguments), dict), c)
    # parallel calls allowed, cut off by max_tokens after the first call
    # closed: inside the next call's opening markup, then inside its
    # arguments (the cuts placed by the uncut greedy answer's tokens); the
    # calls that closed come back, never the markup, finish length
    kw = dict(model=MODEL, messages=ASK, tools=[WEATHER, TIME], temperature=0,
              tool_choice="required")
    full = cl.chat.completions.create(max_tokens=200, logprobs=True, **kw).choices[0]
    toks = [t.token for t in (full.logprobs.content if full.logprobs else None) or []]
    closed = next((i + 1 for i in range(len(toks))
                   if "</tool_call>" in "".join(toks[:i + 1])), None)
    check("required, parallel, uncut: two calls or more, the first closed by token 40",
          len(full.message.tool_calls or []) >= 2 and closed is not None and closed <= 40,
          (closed, full))
    for where, budget in (("in the next call's markup", (closed or 40) + 3),
                          ("in the next call's arguments", (closed or 40) + 12)):
        c = cl.chat.completions.create(max_tokens=budget, **kw).choices[0]
        calls = c.message.tool_calls or []
        check(f"required, cut off {where}: the calls that closed, no markup, finish length",
              c.finish_reason == "length" and len(calls) >= 1 and not c.message.content and
              all(call_ok(t, t.function.name) for t in calls), c)
        got, finish, content = {}, None, ""
        for ch in cl.chat.completions.create(stream=True, max_tokens=budget, **kw):
            if not ch.choices:
                continue
            content += ch.choices[0].delta.content or ""
            for tc in ch.choices[0].delta.tool_calls or []:
                e = got.setdefault(tc.index, ["", ""])
                e[0] += tc.function.name or ""
                e[1] += tc.function.arguments or ""
            finish = ch.choices[0].finish_reason or finish
        check(f"required, cut off {where}, streamed: the same calls, finish length",
              finish == "length" and not content and
              [got.get(i) for i in range(len(got))] ==
              [[t.function.name, t.function.arguments] for t in calls], (got, finish))


def few_shot_two_calls():
    """A conversation whose earlier turns each asked about two cities and
    were answered with two calls, then a third such question."""
    def turn(a, b, i):
        call = lambda c, k: {"id": f"call_{i}{k}", "type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps({"city": c})}}
        return [{"role": "user", "content": f"What is the weather in {a} and in {b}?"},
                {"role": "assistant", "content": None,
                 "tool_calls": [call(a, "a"), call(b, "b")]},
                {"role": "tool", "tool_call_id": f"call_{i}a", "content": "sunny"},
                {"role": "tool", "tool_call_id": f"call_{i}b", "content": "rain"},
                {"role": "assistant", "content": f"{a}: sunny. {b}: rain."}]
    return turn("London", "Tokyo", 1) + turn("Paris", "Berlin", 2) + [
        {"role": "user", "content": "What is the weather in Rome and in Oslo?"}]


def test_required_parallel(cl):
    """tool_choice "required" makes at least one call, and more where
    parallel_tool_calls allows (vLLM's required grammar is a list of calls);
    with parallel_tool_calls false exactly one."""
    kw = dict(model=MODEL, messages=few_shot_two_calls(), tools=[WEATHER, TIME], temperature=0,
              max_tokens=120, tool_choice="required")
    r = cl.chat.completions.create(**kw)
    c = r.choices[0]
    calls = c.message.tool_calls or []
    check("required, parallel: several calls, each well formed", len(calls) >= 2 and
          all(call_ok(t, t.function.name) for t in calls) and c.finish_reason == "tool_calls" and
          len({t.id for t in calls}) == len(calls), c)
    got = {}
    for ch in cl.chat.completions.create(stream=True, **kw):
        for tc in (ch.choices[0].delta.tool_calls or []) if ch.choices else []:
            e = got.setdefault(tc.index, ["", ""])
            e[0] += tc.function.name or ""
            e[1] += tc.function.arguments or ""
    check("required, parallel, streamed: the same calls",
          [got.get(i) for i in range(len(got))] ==
          [[t.function.name, t.function.arguments] for t in calls], (got, calls))
    r = cl.chat.completions.create(parallel_tool_calls=False, **kw)
    one = r.choices[0].message.tool_calls or []
    check("required, parallel_tool_calls false: one call", len(one) == 1 and
          call_ok(one[0], one[0].function.name) and r.choices[0].finish_reason == "tool_calls",
          r.choices[0])


def test_unsupported_schema(cl):
    odd = {"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"key": {"oneOf": [{"type": "string"},
                                                           {"type": "integer"}]}}}}}
    r = cl.chat.completions.create(model=MODEL, messages=ASK, tools=[odd], temperature=0,
                                   max_tokens=40, tool_choice="required")
    calls = r.choices[0].message.tool_calls or []
    check("schema the grammar cannot express: still a call with an object",
          len(calls) == 1 and isinstance(json.loads(calls[0].function.arguments), dict),
          r.choices[0])


def test_stream(cl):
    kw = dict(model=MODEL, messages=ASK, tools=[WEATHER, TIME], temperature=0, max_tokens=60,
              tool_choice={"type": "function", "function": {"name": "get_weather"}})
    whole = cl.chat.completions.create(**kw).choices[0]
    calls, finish, content, pieces = {}, None, "", 0
    for ch in cl.chat.completions.create(stream=True, **kw):
        if not ch.choices:
            continue
        d = ch.choices[0].delta
        content += d.content or ""
        for tc in d.tool_calls or []:
            e = calls.setdefault(tc.index, {"id": None, "name": "", "args": ""})
            e["id"] = tc.id or e["id"]
            if tc.function:
                e["name"] += tc.function.name or ""
                e["args"] += tc.function.arguments or ""
                pieces += bool(tc.function.arguments)
        finish = ch.choices[0].finish_reason or finish
    wc = whole.message.tool_calls or []
    check("stream: one call", len(calls) == 1 and 0 in calls, calls)
    if wc and 0 in calls:
        check("stream: same name and arguments (byte for byte) as non-streamed",
              calls[0]["name"] == wc[0].function.name and
              calls[0]["args"] == wc[0].function.arguments, (calls, wc))
        check("stream: arguments arrive in pieces as they are written", pieces > 1, pieces)
        check("stream: id call_...", (calls[0]["id"] or "").startswith("call_"), calls)
    check("stream: finish tool_calls", finish == "tool_calls" == whole.finish_reason,
          (finish, whole.finish_reason))
    check("stream: no content", content == "" and not whole.message.content, content)


def test_forced_arguments(cl):
    """Forced calls' arguments start at the object (the grammar allows
    blanks before it; the SDK's stream helper parses partial arguments of
    strict tools and fails on blank ones); one cut off by max_tokens comes
    back as the call so far, streamed or not, never as markup in content."""
    strict = {"type": "function", "function": dict(WEATHER["function"], strict=True)}
    for label, choice in (("required", "required"),
                          ("named", {"type": "function", "function": {"name": "get_weather"}})):
        kw = dict(model=MODEL, messages=ASK, tools=[strict], temperature=0, max_tokens=60,
                  tool_choice=choice)
        r = cl.chat.completions.create(**kw)
        calls = r.choices[0].message.tool_calls or []
        check(f"{label}: arguments start with {{", len(calls) == 1 and
              calls[0].function.arguments.startswith("{"), r.choices[0].message)
        args = ""
        try:
            with cl.chat.completions.stream(**kw) as st:
                for ev in st:
                    pass
                final = st.get_final_completion()
            args = (final.choices[0].message.tool_calls or [None])[0].function.arguments
            ok = True
        except Exception as e:  # the helper raising is the failure
            ok = repr(e)
        check(f"{label}: the SDK's stream helper takes the streamed call", ok is True and
              calls and args == calls[0].function.arguments, (ok, args))
    named = {"type": "function", "function": {"name": "get_weather"}}
    kw = dict(model=MODEL, messages=ASK, tools=[WEATHER], temperature=0, max_tokens=6,
              tool_choice=named)
    whole = cl.chat.completions.create(**kw).choices[0]
    wc = whole.message.tool_calls or []
    check("cut off: the call so far, no content, finish length",
          len(wc) == 1 and wc[0].function.name == "get_weather" and
          wc[0].function.arguments.startswith("{") and not whole.message.content and
          whole.finish_reason == "length", whole)
    args, finish, content = "", None, ""
    for ch in cl.chat.completions.create(stream=True, **kw):
        if ch.choices:
            d = ch.choices[0].delta
            content += d.content or ""
            for tc in d.tool_calls or []:
                args += (tc.function.arguments or "") if tc.function else ""
            finish = ch.choices[0].finish_reason or finish
    check("cut off, streamed: the same arguments, finish length",
          wc and args == wc[0].function.arguments and finish == "length" and not content,
          (args, finish, content))


def test_responses_cut_call(cl):
    """The Responses API over a named call that max_output_tokens cuts: the
    function_call item is incomplete (as the response), its arguments the
    object as far as it went, never markup; streamed the same."""
    kw = dict(model=MODEL, input="What is the weather in Paris?", temperature=0,
              max_output_tokens=16, tools=[{"type": "function", "name": "f", "parameters": {
                  "type": "object", "properties": {}}}],
              tool_choice={"type": "function", "name": "f"})
    r = cl.responses.create(**kw)
    calls = [o for o in r.output if o.type == "function_call"]
    check("responses, cut call: incomplete, the item too, no markup in arguments",
          r.status == "incomplete" and len(calls) == 1 and calls[0].status == "incomplete" and
          "<" not in calls[0].arguments and calls[0].arguments.startswith("{"), r.output)
    done = [e.item for e in cl.responses.create(stream=True, **kw)
            if e.type == "response.output_item.done"]
    check("responses, cut call, streamed: the same item",
          len(done) == 1 and calls and done[0].status == "incomplete" and
          done[0].arguments == calls[0].arguments, (done, calls))


def lp_list(entries):
    return [(e.token, round(e.logprob, 5), [(t.token, round(t.logprob, 5))
                                             for t in e.top_logprobs or []])
            for e in entries or []]


def test_stream_logprobs(cl):
    named = {"type": "function", "function": {"name": "get_weather"}}
    for label, choice, n in (("named call", named, 40), ("auto, text", "auto", 24)):
        kw = dict(model=MODEL, messages=ASK, tools=[WEATHER, TIME], temperature=0,
                  max_tokens=n, tool_choice=choice, logprobs=True, top_logprobs=2)
        whole = cl.chat.completions.create(**kw)
        want = lp_list(whole.choices[0].logprobs.content if whole.choices[0].logprobs else None)
        got, usage = [], None
        for ch in cl.chat.completions.create(stream=True, stream_options={"include_usage": True},
                                             **kw):
            usage = ch.usage or usage
            if ch.choices and ch.choices[0].logprobs:
                got += lp_list(ch.choices[0].logprobs.content)
        # every token but an ending EOS (which has no text) has its entry
        toks = whole.usage.completion_tokens
        check(f"stream logprobs, {label}: one entry per token",
              len(want) in (toks, toks - 1) and len(want) > 4, (len(want), toks))
        check(f"stream logprobs, {label}: the non-streamed answer's, in order", got == want,
              (got[:4], want[:4], len(got), len(want)))


def test_none_and_parallel(srv, cl):
    r = cl.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER], temperature=0,
                                   max_tokens=8, tool_choice="none")
    check("none: text, no calls", r.choices[0].message.tool_calls is None and
          r.choices[0].finish_reason in ("stop", "length"), r.choices[0])
    a = cl.post("/../tokenize", cast_to=object, body={"messages": ASK, "tools": [WEATHER],
                                                      "tool_choice": "none"})
    b = cl.post("/../tokenize", cast_to=object, body={"messages": ASK})
    check("none: tools not rendered", a["tokens"] == b["tokens"], (a["count"], b["count"]))
    r = cl.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER], temperature=0,
                                   max_tokens=60, tool_choice="required",
                                   parallel_tool_calls=False)
    check("parallel_tool_calls false: one call", len(r.choices[0].message.tool_calls or []) == 1,
          r.choices[0].message)


def test_errors(cl):
    bad = [
        ({"tools": {"a": 1}}, "tools"),
        ({"tools": [{"type": "function"}]}, "tools[0]"),
        ({"tools": [{"type": "function", "function": {"name": "has space"}}]},
         "tools[0].function"),
        ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function",
                                              "function": {"name": "nope"}}}, "tool_choice"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [WEATHER], "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
        ({"messages": ASK + [{"role": "assistant", "tool_calls": [{"id": "x"}]}]},
         "messages[1].tool_calls"),
    ]
    for extra, param in bad:
        body = {"model": MODEL, "messages": ASK, "max_tokens": 4, **extra}
        try:
            cl.post("/chat/completions", cast_to=object, body=body)
            check(f"400 for {param}", False, "accepted")
        except openai.BadRequestError as e:
            err = e.body if isinstance(e.body, dict) else {}
            check(f"400 for {param}", err.get("param") == param, err)


def main():
    srv = serve_proc.Server("-t", "2", "--max-model-len", "1024", "--served-model-name", MODEL)
    cl = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="x",
                       max_retries=0, timeout=120)
    t0 = time.time()
    try:
        test_round_trip(cl)
        test_required(cl)
        test_required_parallel(cl)
        test_unsupported_schema(cl)
        test_stream(cl)
        test_stream_logprobs(cl)
        test_forced_arguments(cl)
        test_responses_cut_call(cl)
        test_none_and_parallel(srv, cl)
        test_errors(cl)
    except Exception as e:
        import traceback
        traceback.print_exc()
        check("no exception", False, repr(e))
    finally:
        srv.stop()
    return summary(t0, srv)


if __name__ == "__main__":
    sys.exit(main())
