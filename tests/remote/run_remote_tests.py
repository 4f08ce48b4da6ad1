#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Runs test_remote against real servers on 127.0.0.1, started here and stopped on every exit path.

nginx (Debian's nginx-light) serves a temporary copy of tests/data with byte ranges, ETags and If-Match; a small
proxy in front of it injects faults by the first step of the path; s3rver (npm), when its folder is given, serves
the same files as an S3 bucket "weights" (key id S3RVER, secret S3RVER). s3rver serves ranges and refuses an
unknown key id (403 InvalidAccessKeyId) and a request without x-amz-content-sha256, but it does not check SigV4
signatures (a wrong secret passes), lets anonymous requests through, and ignores If-Match. The URLs reach the test through the environment.
With --tool, the servers serve tool_remote_tests.py instead, which runs that tensorfile program on their URLs.

usage: run_remote_tests.py TEST_EXECUTABLE DATA_DIR [--s3rver DIR_WITH_node_modules] [-- catch2 arguments]
       run_remote_tests.py --tool TENSORFILE_PROGRAM DATA_DIR [--s3rver DIR_WITH_node_modules]
"""
import http.client
import http.server
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, process, what, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before it listened")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {seconds} s")


NGINX_CONF = """\
daemon off;
worker_processes 2;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log {tmp}/access.log;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
  default_type application/octet-stream;
  server {{
    listen 127.0.0.1:{port};
    root {www};
    location /forbidden/ {{ return 403; }}
    location /signed/ {{
      if ($arg_token != "s3cret-token") {{ return 403; }}
      alias {www}/;
    }}
  }}
}}
"""


class FaultProxy(http.server.BaseHTTPRequestHandler):
    """GET /<fault>/<path>: <path> fetched from nginx, then the fault applied. Faults:
    drop (the first 2 GETs of each file cut mid-body), drop-always, flaky (the first 2 GETs of each file answer
    503 then 500), flaky-always (503), trickle (a byte every half second), forbidden (403), unconditional (If-Match and If-Unmodified-Since not
    forwarded, as a server that ignores them), slow (each GET held 50 ms, the GETs in flight counted), pass (none).
    GET /slow-most/ answers the most slow GETs that were in flight at once since the last such GET."""

    protocol_version = "HTTP/1.1"
    upstream_port = 0
    attempts = {}
    lock = threading.Lock()
    slow_in_flight = 0
    slow_most = 0

    def log_message(self, *args):  # quiet: the test's output is what matters
        pass

    def count(self, key):
        with FaultProxy.lock:
            FaultProxy.attempts[key] = FaultProxy.attempts.get(key, 0) + 1
            return FaultProxy.attempts[key]

    def send_plain(self, status, text):
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 (the handler's name)
        parts = self.path.split("/", 2)
        fault, rest = (parts[1], parts[2]) if len(parts) == 3 else ("pass", "")
        if fault == "slow-most":
            with FaultProxy.lock:
                most, FaultProxy.slow_most = FaultProxy.slow_most, 0
            return self.send_plain(200, str(most))
        if fault != "slow":
            return self.serve(fault, rest)
        with FaultProxy.lock:
            FaultProxy.slow_in_flight += 1
            FaultProxy.slow_most = max(FaultProxy.slow_most, FaultProxy.slow_in_flight)
        try:
            time.sleep(0.05)
            return self.serve(fault, rest)
        finally:
            with FaultProxy.lock:
                FaultProxy.slow_in_flight -= 1

    def serve(self, fault, rest):
        attempt = self.count((fault, rest))  # per file: a resumed range counts as the next GET
        if fault == "forbidden":
            return self.send_plain(403, "forbidden")
        if fault == "flaky-always" or (fault == "flaky" and attempt <= 2):
            return self.send_plain(500 if fault == "flaky" and attempt == 2 else 503, "try again")
        upstream = http.client.HTTPConnection("127.0.0.1", FaultProxy.upstream_port, timeout=30)
        kept = ("range",) if fault == "unconditional" else ("range", "if-match", "if-unmodified-since")
        forwarded = {k: v for k, v in self.headers.items() if k.lower() in kept}
        upstream.request("GET", "/" + rest, headers=forwarded)
        response = upstream.getresponse()
        body = response.read()
        upstream.close()
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() in ("content-length", "content-range", "etag", "last-modified", "content-type"):
                self.send_header(name, value)
        self.end_headers()
        try:
            if fault == "drop-always" or (fault == "drop" and attempt <= 2 and len(body) > 1):
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if fault == "trickle":
                for i in range(len(body)):
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
                    time.sleep(0.5)
                return
            self.wfile.write(body)
        except OSError:
            self.close_connection = True  # the client gave up (a trickle it timed out)


class QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):  # a client that hung up on a fault: expected
        pass


def main():
    args = sys.argv[1:]
    catch_args = []
    if "--" in args:
        catch_args = args[args.index("--") + 1 :]
        args = args[: args.index("--")]
    s3rver_dir = None
    if "--s3rver" in args:
        i = args.index("--s3rver")
        s3rver_dir = args[i + 1]
        del args[i : i + 2]
    command = None
    if "--tool" in args:
        i = args.index("--tool")
        command = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tool_remote_tests.py"),
                   args[i + 1]]
        del args[i : i + 2]
        (data_dir,) = args
    else:
        executable, data_dir = args
        command = [executable] + catch_args
    tmp = tempfile.mkdtemp(prefix="tensorfile-remote-")
    os.chmod(tmp, 0o755)  # nginx's workers may run as another user (nobody, when started as root)
    www = os.path.join(tmp, "www")
    shutil.copytree(data_dir, www)
    os.makedirs(os.path.join(www, "forbidden"))
    shutil.copy(os.path.join(data_dir, "safetensors", "overall.safetensors"), os.path.join(www, "forbidden"))
    for root, dirs, files in os.walk(tmp):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    processes = []
    servers = []
    try:
        nginx_port = free_port()
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as out:
            out.write(NGINX_CONF.format(tmp=tmp, www=www, port=nginx_port))
        nginx = subprocess.Popen(["nginx", "-p", tmp, "-c", conf, "-e", os.path.join(tmp, "error.log")])
        processes.append(nginx)
        wait_for_port(nginx_port, nginx, "nginx")

        FaultProxy.upstream_port = nginx_port
        proxy = QuietServer(("127.0.0.1", 0), FaultProxy)
        servers.append(proxy)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()

        env = dict(os.environ)
        env["TENSORFILE_REMOTE_HTTP"] = f"http://127.0.0.1:{nginx_port}"
        env["TENSORFILE_REMOTE_PROXY"] = f"http://127.0.0.1:{proxy.server_address[1]}"
        env["TENSORFILE_REMOTE_ROOT"] = www

        if s3rver_dir is not None:
            s3_port = free_port()
            s3_root = os.path.join(tmp, "s3")
            bucket = os.path.join(tmp, "bucket")
            os.makedirs(s3_root)
            shutil.copytree(os.path.join(data_dir, "safetensors"), os.path.join(bucket, "safetensors"))
            shutil.copytree(os.path.join(data_dir, "sharded"), os.path.join(bucket, "sharded"))
            shutil.copytree(os.path.join(data_dir, "torch"), os.path.join(bucket, "torch"))
            s3 = subprocess.Popen(
                ["node", os.path.join(s3rver_dir, "node_modules", "s3rver", "bin", "s3rver.js"), "--address",
                 "127.0.0.1", "--port", str(s3_port), "--directory", s3_root, "--configure-bucket", "weights",
                 "--silent"], cwd=tmp, stdout=subprocess.DEVNULL)
            processes.append(s3)
            wait_for_port(s3_port, s3, "s3rver")
            # s3rver keeps objects in its own layout: the fixtures go in by signed PUTs (curl's --aws-sigv4).
            for folder, _, files in os.walk(bucket):
                for f in files:
                    path = os.path.join(folder, f)
                    key = os.path.relpath(path, bucket)
                    subprocess.run(["curl", "-sSf", "-o", "/dev/null", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                                    "S3RVER:S3RVER", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-T", path,
                                    f"http://127.0.0.1:{s3_port}/weights/{key}"], check=True)
            env["TENSORFILE_REMOTE_S3_ENDPOINT"] = f"http://127.0.0.1:{s3_port}"
            env["TENSORFILE_REMOTE_S3_BUCKET"] = "weights"
            env.update(AWS_ENDPOINT_URL=f"http://127.0.0.1:{s3_port}", AWS_ACCESS_KEY_ID="S3RVER",
                       AWS_SECRET_ACCESS_KEY="S3RVER", AWS_REGION="us-east-1")
            env.pop("AWS_SESSION_TOKEN", None)

        return subprocess.run(command, env=env).returncode
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
