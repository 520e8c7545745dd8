"""A minimal Berth agent using only Python's standard library.

POST / with {"inputs": "..."} answers JSON. With a thread id header the agent remembers the last turns
of that conversation; without one it keeps no memory.
"""

import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Turns remembered per thread; older ones are forgotten so memory stays bounded.
MAX_TURNS_PER_THREAD = 20
# Largest request body accepted, in bytes.
MAX_BODY_BYTES = 1024 * 1024
# "upper" answers the inputs in capitals, "echo" unchanged (the template's one variable).
REPLY_STYLE = "echo" if os.environ.get("REPLY_STYLE") == "echo" else "upper"

THREAD_HEADERS = ("X-Blaxel-Thread-Id", "X-Service-Thread-Id", "Thread-Id")

threads: dict[str, list[str]] = {}
threads_lock = threading.Lock()


def answer(inputs: str, history: list[str]) -> dict:
    """The agent's logic: replace it with yours."""
    return {
        "output": inputs if REPLY_STYLE == "echo" else inputs.upper(),
        "inputs": inputs,
        "turn": len(history) + 1,
        "previous": history[-1] if history else None,
    }


class Handler(BaseHTTPRequestHandler):
    def send_json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self.send_json(200, {"status": "ok"})
        else:
            self.send_json(404, {"error": "not found"})

    def do_POST(self) -> None:
        if self.path not in ("/", ""):
            self.send_json(404, {"error": "not found"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self.send_json(413, {"error": "body too large"})
            return
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError as e:
            self.send_json(400, {"error": f"invalid request body: {e}"})
            return
        inputs = body.get("inputs") if isinstance(body, dict) else None
        if not isinstance(inputs, str):
            self.send_json(400, {"error": 'body must be {"inputs": "<text>"}'})
            return
        thread = next((self.headers[h] for h in THREAD_HEADERS if self.headers.get(h)), None)
        with threads_lock:
            history = list(threads.get(thread, [])) if thread else []
            if thread:
                threads[thread] = (history + [inputs])[-MAX_TURNS_PER_THREAD:]
        self.send_json(200, answer(inputs, history))

    def log_message(self, format: str, *args) -> None:
        sys.stderr.write("%s %s\n" % (self.address_string(), format % args))


def main() -> None:
    host = os.environ.get("HOST", "0.0.0.0")
    port = int(os.environ.get("PORT", "8000"))
    server = ThreadingHTTPServer((host, port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"agent listening on http://{host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
