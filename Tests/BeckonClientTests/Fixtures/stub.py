#!/usr/bin/env python3
"""A loopback HTTP server the client tests point the client at, answering every request one way: `status CODE [BODY]`,
or `redirect URL` (a 307 to URL). Prints its port, then one JSON line on standard error per request it took (method,
path, whether it carried Authorization). Stops when its standard input closes (the test ended)."""
import http.server
import json
import sys
import threading

mode, args = sys.argv[1], sys.argv[2:]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        print(json.dumps({"method": self.command, "path": self.path,
                          "authorization": "Authorization" in self.headers}), file=sys.stderr, flush=True)
        if mode == "redirect":
            self.send_response(307)
            self.send_header("Location", args[0] + self.path)
            body = b""
        else:
            self.send_response(int(args[0]))
            body = (args[1] if len(args) > 1 else "").encode()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = answer

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
