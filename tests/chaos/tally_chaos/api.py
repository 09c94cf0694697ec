"""A small HTTP client for the gateway and the internal endpoints: one
keep-alive connection per thread, JSON in and out."""
import http.client
import json
import threading


class Reply:
    def __init__(self, status, body, headers):
        self.status = status      # None: no answer (connection failed or timed out)
        self.body = body          # parsed JSON, or None
        self.headers = headers    # lower-cased names

    @property
    def error_code(self):
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            return self.body["error"].get("code")
        return None


class Client:
    """Thread-safe: each thread has its own connection."""

    def __init__(self, port, token=None, timeout=10.0, host="127.0.0.1"):
        self.host, self.port, self.token, self.timeout = host, port, token, timeout
        self._local = threading.local()

    def _conn(self):
        c = getattr(self._local, "conn", None)
        if c is None:
            c = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self._local.conn = c
        return c

    def _drop(self):
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
        self._local.conn = None

    def call(self, method, path, body=None, token=None):
        headers = {"Content-Type": "application/json"}
        token = token or self.token
        if token:
            headers["Authorization"] = "Bearer " + token
        data = None if body is None else json.dumps(body)
        try:
            c = self._conn()
            c.request(method, path, body=data, headers=headers)
            r = c.getresponse()
            raw = r.read()
            hdrs = {k.lower(): v for k, v in r.getheaders()}
            if hdrs.get("connection", "").lower() == "close":
                self._drop()
        except (OSError, http.client.HTTPException):
            self._drop()
            return Reply(None, None, {})
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        return Reply(r.status, parsed, hdrs)

    def get(self, path, token=None):
        return self.call("GET", path, None, token)

    def post(self, path, body, token=None):
        return self.call("POST", path, body, token)
