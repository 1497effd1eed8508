"""HTTPS: `ingot serve --ssl-certfile C --ssl-keyfile K` (vLLM's flags), with
a self-signed certificate made here by the openssl command line:

- a client that verifies the certificate reaches /health, and the official
  `openai` client (its HTTP client told to trust the certificate) gets a
  chat completion, whole and streamed;
- a plain-HTTP request to the HTTPS port gets no answer, and idle TCP
  connections that never start a handshake hold up no one;
- a key that is not the certificate's, a certificate given as the key, a
  file that is not PEM, a missing file, and one flag without the other
  stop the server at start with a message (exit 1; 2 for the usage
  error)."""
import http.client
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_proc  # noqa: E402
from checks import check, summary  # noqa: E402

M = "gemma-3-270m-q4_k_m"


def make_cert(d, name):
    """A self-signed certificate for 127.0.0.1 and its key, as PEM files."""
    cert, key = os.path.join(d, name + ".crt"), os.path.join(d, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1", "-addext",
                    "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


def https_get(port, path, cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=ctx)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return r.status, body


def serve_fails(args):
    p = subprocess.run([serve_proc.INGOT, "serve", "--port", "0", *args], capture_output=True,
                       text=True, timeout=120)
    return p.returncode, p.stderr


def test_serving(cert, key):
    srv = serve_proc.Server("--ssl-certfile", cert, "--ssl-keyfile", key, "-t", "2")
    try:
        check("the start line says https",
              any("listening on https://" in l for l in srv.log), srv.log)
        st, body = https_get(srv.port, "/health", cert)
        check("GET /health over verified TLS", st == 200 and "ok" in body, (st, body))
        import openai
        cl = openai.OpenAI(base_url=f"https://127.0.0.1:{srv.port}/v1", api_key="x",
                           http_client=openai.DefaultHttpxClient(verify=cert))
        msgs = [{"role": "user", "content": "Say hello."}]
        r = cl.chat.completions.create(model=M, messages=msgs, max_tokens=8, temperature=0)
        s = cl.chat.completions.create(model=M, messages=msgs, max_tokens=8, temperature=0,
                                       stream=True)
        text = "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices)
        check("the openai client over HTTPS: the same answer whole and streamed",
              r.choices[0].message.content and text == r.choices[0].message.content,
              (r, text))
        idle = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(5)]
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        try:
            c.request("GET", "/health")
            c.getresponse().read()
            plain = "answered"
        except (OSError, http.client.HTTPException):
            plain = "refused"
        t0 = time.time()
        st, _ = https_get(srv.port, "/health", cert)
        check("plain HTTP to the HTTPS port gets no answer",
              plain == "refused", plain)
        check("idle connections without a handshake hold up no one",
              st == 200 and time.time() - t0 < 5, (st, time.time() - t0))
        for s_ in idle:
            s_.close()
        check("the server is still up", srv.p.poll() is None)
    finally:
        srv.stop()


def test_bad_files(d, cert, key):
    other_cert, other_key = make_cert(d, "other")
    rc, err = serve_fails(["--ssl-certfile", cert, "--ssl-keyfile", other_key])
    check("a key that is not the certificate's: exit 1, saying HTTPS cannot start",
          rc == 1 and "cannot serve HTTPS" in err, (rc, err[-300:]))
    rc, err = serve_fails(["--ssl-certfile", cert, "--ssl-keyfile", cert])
    check("the certificate given as the key: exit 1", rc == 1 and "HTTPS" in err,
          (rc, err[-300:]))
    junk = os.path.join(d, "junk.pem")
    with open(junk, "w") as f:
        f.write("not a certificate\n")
    rc, err = serve_fails(["--ssl-certfile", junk, "--ssl-keyfile", key])
    check("a file that is not PEM: exit 1 naming it", rc == 1 and "not a PEM file" in err,
          (rc, err[-300:]))
    rc, err = serve_fails(["--ssl-certfile", cert, "--ssl-keyfile", os.path.join(d, "none")])
    check("a missing key file: exit 1 naming it", rc == 1 and "--ssl-keyfile" in err,
          (rc, err[-300:]))
    rc, err = serve_fails(["--ssl-certfile", cert])
    check("one flag without the other: usage error", rc == 2 and "go together" in err,
          (rc, err[-300:]))


def main():
    t0 = time.time()
    if not shutil.which("openssl"):
        check("openssl is installed (make test-deps)", False, "no openssl command")
        return summary(t0)
    with tempfile.TemporaryDirectory() as d:
        cert, key = make_cert(d, "server")
        test_serving(cert, key)
        test_bad_files(d, cert, key)
    return summary(t0)


if __name__ == "__main__":
    sys.exit(main())
