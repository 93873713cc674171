"""Origin of the differential harness (internal/differential, docs/differential.md).

Flask (Debian's python3-flask, on Werkzeug's development server) reading the
identity fields the way Flask applications do, and echoing what each idiom
read:

  /health                200 "ok" (readiness)
  /v/flask-form          request.form.get(NAME)       (the first value)
  /v/flask-values        request.values.get(NAME)     (query first, then form)
  /v/flask-json          request.get_json(silent=True).get(NAME)
  /v/flask-json-force    request.get_json(force=True, silent=True).get(NAME)
                         (JSON whatever the Content-Type, as many handlers do)
  /probe/*               200: a probe the edge forwarded

The echo is JSON: {"variant", "ct" (hex of the Content-Type the app saw),
"fields": {NAME: {"type", "values": [hex of the UTF-8 of each leaf]}},
"error"}. Usage: /usr/bin/python3 app.py PORT
"""

import json
import sys

from flask import Flask, Response, request

FIELDS = ("phone", "username", "email", "challenge_id", "code")

app = Flask(__name__)


def leaves(v, out):
    if isinstance(v, dict):
        for x in v.values():
            leaves(x, out)
    elif isinstance(v, list):
        for x in v:
            leaves(x, out)
    elif v is not None:
        out.append(str(v).encode("utf-8", "surrogatepass").hex())


def reading(v):
    if v is None:
        return {"type": "absent", "values": []}
    out = []
    leaves(v, out)
    return {"type": type(v).__name__, "values": out}


def echo(variant, get, error=""):
    fields = {}
    for f in FIELDS:
        fields[f] = reading(get(f) if get else None)
    body = json.dumps({
        "variant": variant,
        "ct": (request.headers.get("Content-Type") or "").encode("utf-8", "surrogateescape").hex(),
        "fields": fields,
        "error": error,
    })
    return Response(body, mimetype="application/json", headers={"X-Differential-Variant": variant})


def mapping_get(d):
    return (lambda f: d.get(f)) if isinstance(d, dict) else None


@app.route("/health")
def health():
    return "ok"


@app.route("/probe/<path:rest>", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
def probe(rest):
    return echo("probe", None)


@app.route("/v/<variant>", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
def variant(variant):
    try:
        if variant == "flask-form":
            form = request.form
            return echo(variant, lambda f: form.get(f))
        if variant == "flask-values":
            values = request.values
            return echo(variant, lambda f: values.get(f))
        if variant == "flask-json":
            return echo(variant, mapping_get(request.get_json(silent=True)))
        if variant == "flask-json-force":
            return echo(variant, mapping_get(request.get_json(force=True, silent=True)))
    except Exception as e:  # the application would fail: it read nothing
        return echo(variant, None, repr(e))
    return Response("no such variant", status=404)


if __name__ == "__main__":
    app.run(host="127.0.0.1", port=int(sys.argv[1]), threaded=True)
