"""Constrained decoding through `ingot serve` and the official `openai` client:
response_format json_object and json_schema over several prompts, schemas
and seeds (greedy and temperature > 0, chat and completions, streamed and
not), every output parsed with json and validated with the `jsonschema`
package (formats checked); unsupported schemas answered 400 naming the
construct; ingot's "structured" regex and GBNF outputs match, and so do
vLLM's guided_* and structured_outputs fields. Schemas bound
their strings and arrays so that every output is complete well within
max_tokens: finish_reason must be "stop"."""
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_proc  # noqa: E402
from checks import check, results, summary  # noqa: E402

MODEL = "gemma-3-270m-q4_k_m"




PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "role": {"enum": ["admin", "user", "guest"]},
        "height_m": {"type": "number", "minimum": 0, "maximum": 3},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12},
                 "minItems": 1, "maxItems": 3},
        "active": {"type": "boolean"},
    },
    "required": ["name", "age", "role", "height_m", "tags", "active"],
    "additionalProperties": False,
}

EVENT = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "day": {"type": "string", "format": "date"},
        "host": {"type": "string", "format": "ipv4"},
        "note": {"anyOf": [{"type": "string", "maxLength": 20}, {"type": "null"}]},
        "level": {"const": 3},
        "where": {"$ref": "#/$defs/place"},
    },
    "required": ["id", "day", "host", "note", "level", "where"],
    "additionalProperties": False,
    "$defs": {"place": {"type": "object",
                        "properties": {"city": {"type": "string", "maxLength": 16},
                                       "floor": {"type": "integer", "minimum": -2,
                                                 "maximum": 40}},
                        "required": ["city"], "additionalProperties": False}},
}

# pattern (anchored: an unanchored one lets the value run on around its
# match, which a 270M model does until max_tokens)
CODE = {"type": "object", "additionalProperties": False, "required": ["sku", "note"],
        "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-\\d{4}$"},
                       "note": {"type": "string", "pattern": "^(ok|fine|\"late\")[.!]?$"}}}
POINTS = {
    "type": "array",
    "items": {"type": "object",
              "properties": {"x": {"type": "integer", "minimum": -100, "maximum": 100},
                             "y": {"type": "integer", "minimum": -100, "maximum": 100}},
              "required": ["x", "y"], "additionalProperties": False},
    "minItems": 2, "maxItems": 4,
}

PROMPTS = ["Describe a person as JSON.", "Give me a JSON record for a server event.",
           "Output some data about a cat in JSON.", "List two points in JSON."]


class _Incomplete(Exception):
    pass


def json_prefix_ok(text):
    """Whether text is a prefix of some JSON value (a truncated output)."""
    import re
    num = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
    num_prefix = re.compile(r"-?((0|[1-9][0-9]*)(\.([0-9]+([eE]([+-]([0-9]+)?)?)?)?)?)?\Z"
                            r"|-?(0|[1-9][0-9]*)(\.[0-9]+)?[eE]([+-]?[0-9]*)?\Z")
    ws = " \t\n\r"

    def skip(i):
        while i < len(text) and text[i] in ws:
            i += 1
        if i == len(text):
            raise _Incomplete
        return i

    def lit(i, word):
        rest = text[i:i + len(word)]
        if not word.startswith(rest):
            raise ValueError
        if len(rest) < len(word):
            raise _Incomplete
        return i + len(word)

    def string(i):
        try:
            return json.decoder.scanstring(text, i + 1)[1]
        except ValueError:  # unterminated (truncated) or malformed
            tail = text[i + 1:]
            if '"' not in tail.replace('\\\\', '').replace('\\"', ''):
                raise _Incomplete
            raise

    def value(i):
        i = skip(i)
        c = text[i]
        if c == "{" or c == "[":
            close = "}" if c == "{" else "]"
            i = skip(i + 1)
            if text[i] == close:
                return i + 1
            while True:
                if c == "{":
                    if text[i] != '"':
                        raise ValueError
                    i = skip(string(i))
                    if text[i] != ":":
                        raise ValueError
                    i += 1
                i = skip(value(i))
                if text[i] == close:
                    return i + 1
                if text[i] != ",":
                    raise ValueError
                i = skip(i + 1)
        if c == '"':
            return string(i)
        for w in ("true", "false", "null"):
            if w[0] == c:
                return lit(i, w)
        m = num.match(text, i)
        if num_prefix.match(text, i):
            raise _Incomplete
        if not m:
            raise ValueError
        return m.end()

    try:
        end = value(0)
        return end == len(text)
    except _Incomplete:
        return True
    except (ValueError, IndexError):
        return False


def validator(schema):
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def chat(cl, prompt, rf, seed, temperature, max_tokens, **extra):
    r = cl.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompt}],
                                   response_format=rf, seed=seed, temperature=temperature,
                                   max_tokens=max_tokens, extra_body=extra or None)
    return r.choices[0].message.content, r.choices[0].finish_reason


FEW_SHOT = ('Records as JSON.\nCat: {"name": "Tom", "legs": 4}\n'
            'Bird: {"name": "Tweety", "legs": 2}\n')


def test_json_object(cl, pool):
    rf = {"type": "json_object"}

    def run(job):
        kind, p, s, t = job
        # top_k keeps sampling cheap: inside free-form strings nearly the
        # whole vocabulary is allowed, and untruncated sampling sorts it all
        if kind == "chat":
            return chat(cl, p, rf, s, t, 120, top_k=40)
        r = cl.completions.create(model=MODEL, prompt=FEW_SHOT + p, max_tokens=100, seed=s,
                                  temperature=t, extra_body={"response_format": rf, "top_k": 40})
        return r.choices[0].text, r.choices[0].finish_reason

    jobs = [("chat", p, s, t) for p in PROMPTS[:2] for s, t in ((0, 0.0), (1, 0.9))]
    jobs += [("few-shot", p, s, t) for p in ("Dog: ", "Spider: ", "Fish: ")
             for s, t in ((0, 0.0), (1, 0.9))]
    outs = list(pool.map(run, jobs))
    stopped = 0
    for (kind, p, s, t), (text, fin) in zip(jobs, outs):
        what = f"json_object {kind} ({p!r}, seed {s})"
        if fin != "stop":
            check(what + ": cut by max_tokens, a JSON prefix", fin == "length" and
                  json_prefix_ok(text) and text.lstrip().startswith("{"), text)
            continue
        stopped += 1
        try:
            v = json.loads(text)
            check(what + " parses", isinstance(v, dict), text)
        except ValueError as e:
            check(what + " parses", False, f"{e}: {text!r}")
    # a base model likes long JSON: some outputs must finish, the rest
    # were checked as prefixes above
    check("json_object: a third of the outputs finish", stopped * 3 >= len(jobs),
          f"{stopped}/{len(jobs)} stopped")
    for bad in ('{"a": 1,}', '{"a" 1}', '{} x', '[1, 2', '{"a": tru'):
        check(f"prefix checker on {bad!r}", json_prefix_ok(bad) == (bad in ('[1, 2', '{"a": tru')))


def test_json_schema(cl, pool):
    jobs = []
    for name, schema in (("person", PERSON), ("event", EVENT), ("points", POINTS),
                         ("code", CODE)):
        rf = {"type": "json_schema", "json_schema": {"name": name, "schema": schema,
                                                     "strict": True}}
        for i, p in enumerate(PROMPTS[:2]):
            for s, t in ((0, 0.0), (10 + i, 1.0)):
                jobs.append((name, schema, rf, p, s, t))
    outs = list(pool.map(lambda j: chat(cl, j[3], j[2], j[4], j[5], 400, top_k=40), jobs))
    for (name, schema, rf, p, s, t), (text, fin) in zip(jobs, outs):
        what = f"json_schema {name} ({p!r}, seed {s}, temperature {t})"
        check(what + " finishes", fin == "stop", f"{fin}: {text!r}")
        try:
            errs = [e.message for e in validator(schema).iter_errors(json.loads(text))]
            check(what + " validates", not errs, f"{errs}: {text!r}")
        except ValueError as e:
            check(what + " parses", False, f"{e}: {text!r}")


def test_stream_and_completions(cl):
    rf = {"type": "json_schema", "json_schema": {"name": "points", "schema": POINTS}}
    parts = []
    fin = None
    for ch in cl.chat.completions.create(model=MODEL, messages=[{"role": "user",
                                                                 "content": PROMPTS[3]}],
                                         response_format=rf, seed=5, temperature=0.8,
                                         max_tokens=300, stream=True):
        if ch.choices:
            parts.append(ch.choices[0].delta.content or "")
            fin = ch.choices[0].finish_reason or fin
    text = "".join(parts)
    try:
        errs = list(validator(POINTS).iter_errors(json.loads(text)))
        check("streamed json_schema validates", fin == "stop" and not errs, f"{fin} {errs} {text!r}")
    except ValueError as e:
        check("streamed json_schema parses", False, f"{e}: {text!r}")
    r = cl.completions.create(model=MODEL, prompt="A JSON person record: ", seed=3,
                              temperature=0.7, max_tokens=400,
                              extra_body={"response_format": {"type": "json_schema", "json_schema": {
                                  "name": "person", "schema": PERSON}}})
    text = r.choices[0].text
    try:
        errs = list(validator(PERSON).iter_errors(json.loads(text)))
        check("completions json_schema validates", r.choices[0].finish_reason == "stop" and not errs,
              f"{errs} {text!r}")
    except ValueError as e:
        check("completions json_schema parses", False, f"{e}: {text!r}")


def test_structured(cl):
    import re
    pattern = r"[A-Z][a-z]{2,8} (is|was) [1-9][0-9]{0,2} years old\."
    gbnf = 'root ::= "Answer: " ("yes" | "no") ", because " [a-z ]{1,30} "."'
    for seed in (0, 1):
        r = cl.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Who?"}],
                                       seed=seed, temperature=1.0, max_tokens=60,
                                       extra_body={"structured": {"regex": pattern}})
        text = r.choices[0].message.content
        check(f"structured regex (seed {seed})",
              r.choices[0].finish_reason == "stop" and re.fullmatch(pattern, text), repr(text))
        r = cl.completions.create(model=MODEL, prompt="Is the sky blue?", seed=seed,
                                  temperature=1.0, max_tokens=60,
                                  extra_body={"structured": {"grammar": gbnf}})
        text = r.choices[0].text
        check(f"structured GBNF (seed {seed})", r.choices[0].finish_reason == "stop" and
              re.fullmatch(r"Answer: (yes|no), because [a-z ]{1,30}\.", text), repr(text))
    # the first byte opens 250 x 250 alternatives: more than one step's expansion may take
    wide = ("root ::= a\na ::= " + " | ".join(["b"] * 250) + "\nb ::= " +
            " | ".join(f'"{chr(97 + i % 26)}{chr(97 + i // 26)}"' for i in range(250)))
    for st, needle in (({"regex": "a(?=b)"}, "lookaround"), ({"grammar": "root ::= x"}, "'x'"),
                       ({"regex": "a", "grammar": "root ::= \"a\""}, "structured"),
                       ({"grammar": "root ::= \"a\" []"}, "matches no string"),
                       ({"grammar": wide}, "expands too far")):
        what = str(st) if len(str(st)) < 80 else f"{list(st)[0]} ({needle})"
        try:
            cl.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=8,
                extra_body={"structured": st})
            check(f"structured {what} refused", False, "no error")
        except openai.BadRequestError as e:
            body = e.body if isinstance(e.body, dict) else {}
            check(f"structured {what} refused with 400", needle in body.get("message", ""),
                  e.body)


def test_vllm_names(cl):
    """vLLM's request fields for the same constraints: guided_json / _regex /
    _choice / _grammar and structured_outputs."""
    import re
    msgs = [{"role": "user", "content": "Is the sky blue? Answer."}]

    def out(seed, max_tokens=40, **extra):
        r = cl.chat.completions.create(model=MODEL, messages=msgs, seed=seed, temperature=1.5,
                                       max_tokens=max_tokens, extra_body=extra)
        return r.choices[0].message.content, r.choices[0].finish_reason

    # choices with GBNF/regex metacharacters and UTF-8 come out verbatim
    choices = ["a.b", "c|d", 'say "hi"', "e\\f (x)", "日本", "yes"]
    seen = set()
    for seed in range(6):
        text, fin = out(seed, guided_choice=choices)
        seen.add(text)
        check(f"guided_choice (seed {seed})", text in choices and fin == "stop", repr(text))
    check("guided_choice: not always the same choice", len(seen) > 1, seen)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"},
                                               "n": {"type": "integer", "minimum": 0,
                                                     "maximum": 99}},
              "required": ["ok", "n"], "additionalProperties": False}
    # The schema's longest text: 8 gaps of at most GRAMMAR_JSON_MAX_WS (20)
    # whitespace characters around 21 of content, each token at least one
    # character; at temperature 1.5 a path that takes most of the allowed
    # whitespace ran past 40 tokens, so the budget is that bound and the
    # object must finish.
    json_max_tokens = 8 * 20 + 21
    for seed, given in ((0, schema), (1, json.dumps(schema))):
        text, fin = out(seed, max_tokens=json_max_tokens, guided_json=given)
        ok = fin == "stop"
        try:
            validator(schema).validate(json.loads(text))
        except Exception:
            ok = False
        check(f"guided_json as {type(given).__name__}", ok, repr(text))
    pattern = r"(Yes|No), [a-z ]{3,20}\."
    text, fin = out(2, guided_regex=pattern)
    check("guided_regex", fin == "stop" and re.fullmatch(pattern, text), repr(text))
    text, fin = out(3, guided_grammar='root ::= "Answer: " ("yes" | "no")')
    check("guided_grammar", fin == "stop" and text in ("Answer: yes", "Answer: no"), repr(text))
    for so, good in (({"json": schema}, lambda t: validator(schema).is_valid(json.loads(t))),
                     ({"choice": ["up", "down"]}, lambda t: t in ("up", "down")),
                     ({"regex": pattern}, lambda t: re.fullmatch(pattern, t)),
                     ({"grammar": 'root ::= "x" [0-9]'}, lambda t: re.fullmatch(r"x[0-9]", t)),
                     ({"json_object": True}, lambda t: isinstance(json.loads(t), dict))):
        text, fin = out(4, max_tokens=json_max_tokens if "json" in so else 40,
                        structured_outputs=so)
        try:
            ok = fin == "stop" and good(text)
        except ValueError:
            ok = False
        if "json_object" in so and fin == "length":  # an unbounded object may run on
            ok = text.lstrip().startswith("{") and json_prefix_ok(text)
        check(f"structured_outputs {list(so)[0]}", ok, repr(text))
    r = cl.completions.create(model=MODEL, prompt="Colour of grass:", max_tokens=8,
                              extra_body={"guided_choice": ["green", "blue"]})
    check("guided_choice on completions", r.choices[0].text in ("green", "blue"), r.choices[0])
    for extra, rf, needle in (({"guided_choice": []}, None, "guided_choice"),
                              ({"guided_choice": ["a", 5]}, None, "guided_choice"),
                              ({"guided_json": 5}, None, "guided_json"),
                              ({"guided_regex": "a(?=b)"}, None, "lookaround"),
                              ({"structured_outputs": {"regex": "a", "choice": ["b"]}}, None,
                               "exactly one"),
                              ({"guided_choice": ["a"], "guided_regex": "b"}, None,
                               "cannot be combined"),
                              ({"guided_choice": ["a"]}, {"type": "json_object"},
                               "cannot be combined")):
        try:
            cl.chat.completions.create(model=MODEL, messages=msgs, max_tokens=8,
                                       response_format=rf or openai.NOT_GIVEN, extra_body=extra)
            check(f"{extra} refused", False, "no error")
        except openai.BadRequestError as e:
            body = e.body if isinstance(e.body, dict) else {}
            check(f"{extra} refused with 400", needle in body.get("message", ""), e.body)


def test_too_complex(cl):
    """A pattern whose automaton grows exponentially (a class after '.*',
    then many '.': the state must remember where every earlier letter of
    the class was): the request fails with a 400 naming the cause once
    one step's mask needs more than the grammar's work budget, streamed or
    not, and the server goes on serving."""
    msgs = [{"role": "user", "content": "Write a long sentence."}]
    extra = {"structured": {"regex": "x(.*[a-m].{100}y)"}}
    try:
        r = cl.chat.completions.create(model=MODEL, messages=msgs, max_tokens=100, seed=0,
                                       temperature=1.0, extra_body=extra)
        check("too complex: refused", False, repr(r.choices[0]))
    except openai.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        check("too complex: refused with 400", "too complex" in body.get("message", "") and
              body.get("type") == "invalid_request_error", e.body)
    try:
        n = 0
        for _ in cl.chat.completions.create(model=MODEL, messages=msgs, max_tokens=100, seed=0,
                                            temperature=1.0, stream=True, extra_body=extra):
            n += 1
        check("too complex, streamed: refused", False, f"{n} chunks, no error")
    except openai.APIError as e:
        check("too complex, streamed: an error event", "too complex" in str(e.message), e)
    # the Responses API, streamed: an error event and response.failed end the stream
    import urllib.request
    body = {"model": MODEL, "input": "Write a long sentence.", "stream": True, "seed": 0,
            "max_output_tokens": 100, "temperature": 1.0,
            "text": {"format": {"type": "json_schema", "name": "x",
                                "schema": {"type": "string", "pattern": "^x(.*[a-m].{100}y)$"}}}}
    req = urllib.request.Request(str(cl.base_url).rstrip("/") + "/responses",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        events = [ln[7:].strip() for ln in r.read().decode().splitlines()
                  if ln.startswith("event: ")]
    check("too complex, Responses streamed: error then response.failed, and nothing after",
          events[-2:] == ["error", "response.failed"] and "response.completed" not in events,
          events[-6:])
    # n = 3, streamed: the first choice to fail fails the request; the
    # others are cancelled, not left to fail or finish on their own
    body = {"model": MODEL, "messages": msgs, "max_tokens": 100, "seed": 0, "n": 3,
            "temperature": 1.0, "stream": True, **extra}
    req = urllib.request.Request(str(cl.base_url).rstrip("/") + "/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        data = [ln[6:] for ln in r.read().decode().splitlines() if ln.startswith("data: ")]
    errors = [i for i, d in enumerate(data) if '"error"' in d]
    check("too complex, n = 3 streamed: one error event, then only [DONE]",
          len(errors) == 1 and data[errors[0] + 1:] == ["[DONE]"],
          [d[:80] for d in data[-4:]] + [f"{len(errors)} errors"])
    text, fin = chat(cl, "Say hi.", {"type": "text"}, 0, 0.0, 8)
    check("too complex: the server still serves", isinstance(text, str) and fin, fin)


def test_refused(cl):
    cases = [
        ({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}}, "oneOf"),
        ({"type": "string", "pattern": "^(?=a)"}, "lookaround"),
        ({"type": "integer", "multipleOf": 3}, "multipleOf"),
        ({"type": "string", "format": "uri"}, "uri"),
        ({"type": "array", "uniqueItems": True}, "uniqueItems"),
        ({"type": "wat"}, "wat"),
    ]
    for schema, needle in cases:
        rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
        try:
            chat(cl, "hi", rf, 0, 0.0, 8)
            check(f"schema with {needle} refused", False, "no error")
        except openai.BadRequestError as e:
            body = e.body if isinstance(e.body, dict) else {}
            check(f"schema with {needle} refused with 400 naming it",
                  e.status_code == 400 and needle in body.get("message", "") and
                  body.get("param") == "response_format", e.body)
    for rf in ({"type": "yaml"}, "json", {"type": "json_schema"}):
        try:
            chat(cl, "hi", rf, 0, 0.0, 8)
            check(f"response_format {rf!r} refused", False, "no error")
        except openai.BadRequestError as e:
            check(f"response_format {rf!r} refused", e.status_code == 400, e.body)
    text, _ = chat(cl, "Say hi.", {"type": "text"}, 0, 0.0, 8)
    check("type text is unconstrained and the server still serves", isinstance(text, str))


def main():
    # speculation on: constrained requests must not draft, others still do
    srv = serve_proc.Server("-t", "2", "--max-num-seqs", "16", "--max-model-len", "1024",
                            "--spec", "suffix")
    t0 = time.time()
    try:
        cl = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="x",
                           max_retries=0, timeout=300)
        with ThreadPoolExecutor(16) as pool:
            for name, fn in (("json_object", lambda: test_json_object(cl, pool)),
                             ("json_schema", lambda: test_json_schema(cl, pool)),
                             ("stream and completions", lambda: test_stream_and_completions(cl)),
                             ("structured", lambda: test_structured(cl)),
                             ("vLLM's field names", lambda: test_vllm_names(cl)),
                             ("too complex", lambda: test_too_complex(cl)),
                             ("refused", lambda: test_refused(cl))):
                t = time.time()
                fn()
                print(f"  [{name}: {time.time() - t:.1f}s]", flush=True)
    except Exception as e:
        import traceback
        traceback.print_exc()
        check("no exception", False, repr(e))
    finally:
        srv.stop()
    return summary(t0, srv)


if __name__ == "__main__":
    sys.exit(main())
