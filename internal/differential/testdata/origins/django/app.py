"""Origin of the differential harness (internal/differential, docs/differential.md).

Django (Debian's python3-django) on its own development server (the WSGI
server `manage.py runserver` runs, django.core.servers.basehttp.run), reading
the identity fields the way Django views do, and echoing what each idiom
read:

  /health            200 "ok" (readiness)
  /v/django-post     request.POST.get(NAME)   (QueryDict: the last value)
  /v/django-json     json.loads(request.body).get(NAME)
  /probe/*           200: a probe the edge forwarded

No middleware runs (an API view is csrf_exempt). The echo is JSON:
{"variant", "ct" (hex of the Content-Type the view saw), "fields": {NAME:
{"type", "values": [hex of the UTF-8 of each leaf]}}, "error"}.
Usage: /usr/bin/python3 app.py PORT
"""

import json
import sys

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="differential-harness-not-secret",
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["*"],
    MIDDLEWARE=[],
    INSTALLED_APPS=[],
    LOGGING_CONFIG=None,
)
django.setup()

from django.core.handlers.wsgi import WSGIHandler  # noqa: E402
from django.core.servers.basehttp import run  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.urls import path  # noqa: E402

FIELDS = ("phone", "username", "email", "challenge_id", "code")


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


def echo(request, variant, get, error=""):
    fields = {f: reading(get(f) if get else None) for f in FIELDS}
    body = json.dumps({
        "variant": variant,
        "ct": request.META.get("CONTENT_TYPE", "").encode("utf-8", "surrogateescape").hex(),
        "fields": fields,
        "error": error,
    })
    resp = HttpResponse(body, content_type="application/json")
    resp["X-Differential-Variant"] = variant
    return resp


def health(request):
    return HttpResponse("ok")


def probe(request, rest):
    return echo(request, "probe", None)


def django_post(request):
    try:
        post = request.POST
        return echo(request, "django-post", lambda f: post.get(f))
    except Exception as e:  # the view would fail: it read nothing
        return echo(request, "django-post", None, repr(e))


def django_json(request):
    try:
        d = json.loads(request.body)
    except Exception as e:
        return echo(request, "django-json", None, repr(e))
    return echo(request, "django-json", (lambda f: d.get(f)) if isinstance(d, dict) else None)


urlpatterns = [
    path("health", health),
    path("probe/<path:rest>", probe),
    path("v/django-post", django_post),
    path("v/django-json", django_json),
]

if __name__ == "__main__":
    run("127.0.0.1", int(sys.argv[1]), WSGIHandler(), threading=True)
