"""`ingot serve` as a test fixture: started on a free loopback port (--port 0),
stderr collected in the background, the port read from its "listening on"
line. Shared by the server tests (and bench/soak.py, for metrics)."""
import http.client
import json
import os
import re
import subprocess
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INGOT = os.environ.get("INGOT_BIN", os.path.join(ROOT, "ingot"))


def request(port, method, path, body=None, key=None, headers=None, timeout=60):
    """(status, headers, parsed JSON or text) of one plain HTTP request; body
    as bytes, str, or anything json.dumps takes; key: a Bearer API key."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = "Bearer " + key
    h.update(headers or {})
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read().decode("utf-8", "replace")
    c.close()
    try:
        data = json.loads(data)
    except ValueError:
        pass
    return r.status, dict(r.getheaders()), data


def metrics(port):
    """{'name': value summed over every series (labels ignored)} from /metrics."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            name = k.split("{")[0]
            out[name] = out.get(name, 0.0) + float(v)
    return out


class Server:
    """`ingot serve --port 0 *args`; .port, .log (stderr lines), .p (process)."""

    def __init__(self, *args):
        self.log = []
        self.port = None
        ready = threading.Event()
        self.p = subprocess.Popen([INGOT, "serve", "--port", "0", *args],
                                  stderr=subprocess.PIPE, text=True)

        def reader():
            for line in self.p.stderr:
                self.log.append(line)
                m = re.search(r"listening on https?://[^:]+:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=reader, daemon=True).start()
        ready.wait(120)
        if self.port is None:
            self.stop()
            raise RuntimeError("server did not start:\n" + "".join(self.log))

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(10)
