#!/usr/bin/env python3
"""A small HTTP scheduler extender, Python standard library only.

It speaks kube-scheduler's extender protocol (k8s.io/kube-scheduler/extender/v1: JSON keys
are the Go field names) on four verbs under /scheduler:

  filter      nodes need the label example.com/extender-allowed=true
  prioritize  a node's score is its label example.com/extender-score (0..10, default 0)
  preempt     keeps every victim the scheduler proposes
  bind        binds through the API server given with --apiserver (plain HTTP)

It prints "listening on HOST:PORT" once it accepts connections (--port 0 picks a port).
"""

import argparse
import json
import sys
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ALLOWED = "example.com/extender-allowed"
SCORE = "example.com/extender-score"
MAX_EXTENDER_PRIORITY = 10


def labels(node):
    return ((node or {}).get("metadata") or {}).get("labels") or {}


def name(node):
    return ((node or {}).get("metadata") or {}).get("name", "")


def filter_nodes(args):
    nodes = (args.get("Nodes") or {}).get("items")
    if nodes is None:
        # nodeCacheCapable: only names were sent, and this extender keeps no node cache.
        return {"NodeNames": args.get("NodeNames") or [], "FailedNodes": {}, "Error": ""}
    passed, failed = [], {}
    for node in nodes:
        if labels(node).get(ALLOWED) == "true":
            passed.append(node)
        else:
            failed[name(node)] = f"node(s) lack label {ALLOWED}=true"
    return {"Nodes": {"metadata": {}, "items": passed}, "FailedNodes": failed, "Error": ""}


def prioritize(args):
    scores = []
    for node in (args.get("Nodes") or {}).get("items") or []:
        try:
            score = int(labels(node).get(SCORE, "0"))
        except ValueError:
            score = 0
        scores.append({"Host": name(node), "Score": max(0, min(score, MAX_EXTENDER_PRIORITY))})
    for node_name in args.get("NodeNames") or []:
        scores.append({"Host": node_name, "Score": 0})
    return scores


def preempt(args):
    meta = args.get("NodeNameToMetaVictims")
    if meta is None:
        meta = {
            node: {
                "Pods": [{"UID": (p.get("metadata") or {}).get("uid", "")} for p in v.get("Pods") or []],
                "NumPDBViolations": v.get("NumPDBViolations", 0),
            }
            for node, v in (args.get("NodeNameToVictims") or {}).items()
        }
    return {"NodeNameToMetaVictims": meta}


def bind(args, apiserver):
    if not apiserver:
        return {"Error": "this extender was started without --apiserver"}
    namespace, pod = args.get("PodNamespace", ""), args.get("PodName", "")
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": namespace, "uid": args.get("PodUID", "")},
        "target": {"apiVersion": "v1", "kind": "Node", "name": args.get("Node", "")},
    }
    url = f"{apiserver.rstrip('/')}/api/v1/namespaces/{namespace}/pods/{pod}/binding"
    request = urllib.request.Request(
        url, data=json.dumps(binding).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10):
            return {"Error": ""}
    except Exception as e:  # the scheduler reports the message on the pod
        return {"Error": f"binding {namespace}/{pod}: {e}"}


class Handler(BaseHTTPRequestHandler):
    apiserver = ""

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            args = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as e:
            self.send_error(400, f"invalid JSON: {e}")
            return
        verb = self.path.rstrip("/").rsplit("/", 1)[-1]
        if verb == "filter":
            reply = filter_nodes(args)
        elif verb == "prioritize":
            reply = prioritize(args)
        elif verb == "preempt":
            reply = preempt(args)
        elif verb == "bind":
            reply = bind(args, self.apiserver)
        else:
            self.send_error(404, f"unknown verb {verb}")
            return
        body = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        sys.stderr.write("extender: " + (format % args) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8888)
    parser.add_argument("--apiserver", default="", help="API server URL for bind, e.g. http://127.0.0.1:6443")
    opts = parser.parse_args()
    Handler.apiserver = opts.apiserver
    server = ThreadingHTTPServer((opts.host, opts.port), Handler)
    host, port = server.server_address[:2]
    print(f"listening on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
