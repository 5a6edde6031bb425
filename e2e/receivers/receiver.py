"""Real receivers for the notification tests, in one process.

- POST /webhook: verified with the `standardwebhooks` package (an implementation independent
  of the server's); a bad signature or a changed body is answered 400 and logged as
  `rejected`; a `webhook-id` seen before is logged as `replay`. Once a schema was given
  (POST /schema: the server's `notifications/schema.json`), each payload is validated against
  it with `jsonschema` and what does not fit is logged with the delivery.
- POST /slack: the Block Kit message checked for the shape Slack accepts (header, sections,
  actions whose buttons are links); problems are logged.
- SMTP (aiosmtpd): every mail, parsed, with its plain-text and HTML parts, on three ports: plain,
  STARTTLS required, and TLS from the first byte; the last two with a certificate for 127.0.0.1
  from a CA made here (`trustme`), written to --ca-out for the server to trust.
- GET /log: everything logged, as JSON. POST /mode/{up,down,hang}: answer normally, 503, or
  not at all for a minute.

Prints one JSON line {"http": PORT, "smtp": PORT, "smtp_starttls": PORT, "smtp_tls": PORT} once
listening, then serves until killed.
"""

import argparse
import email
import email.policy
import json
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jsonschema
import trustme
from aiosmtpd.controller import Controller
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

LOCK = threading.Lock()
LOG = []
SEEN = set()
MODE = {"mode": "up"}
SCHEMA = {"validator": None}


def record(entry):
    with LOCK:
        LOG.append(entry)


def slack_problems(msg):
    problems = []
    if not isinstance(msg.get("text"), str) or not msg["text"]:
        problems.append("no fallback text")
    blocks = msg.get("blocks")
    if not isinstance(blocks, list) or not blocks:
        return problems + ["no blocks"]
    for i, b in enumerate(blocks):
        t = b.get("type")
        if t == "header":
            txt = b.get("text", {})
            if txt.get("type") != "plain_text" or not (0 < len(txt.get("text", "")) <= 150):
                problems.append(f"block {i}: a header needs plain_text of 1..150 characters")
        elif t == "section":
            if "text" not in b and "fields" not in b:
                problems.append(f"block {i}: a section needs text or fields")
            for f in b.get("fields", []):
                if f.get("type") not in ("mrkdwn", "plain_text") or len(f.get("text", "")) > 2000:
                    problems.append(f"block {i}: a bad field")
            if len(b.get("fields", [])) > 10:
                problems.append(f"block {i}: more than 10 fields")
        elif t == "actions":
            for e in b.get("elements", []):
                if e.get("type") != "button" or not str(e.get("url", "")).startswith("http"):
                    problems.append(f"block {i}: every action is a link button")
                if e.get("text", {}).get("type") != "plain_text":
                    problems.append(f"block {i}: a button's text is plain_text")
        else:
            problems.append(f"block {i}: unexpected type {t!r}")
    return problems


def handler_for(secret):
    hook = Webhook(secret)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, code, body=b"ok", ctype="text/plain"):
            self.send_response(code)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/log":
                with LOCK:
                    body = json.dumps(LOG).encode()
                return self.answer(200, body, "application/json")
            self.answer(404)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.path == "/schema":
                schema = json.loads(body)
                jsonschema.Draft202012Validator.check_schema(schema)
                SCHEMA["validator"] = jsonschema.Draft202012Validator(schema)
                return self.answer(200)
            if self.path.startswith("/mode/"):
                MODE["mode"] = self.path.rsplit("/", 1)[1]
                return self.answer(200)
            mode = MODE["mode"]
            if mode == "hang":
                record({"kind": "hung", "path": self.path})
                time.sleep(60)
                return
            if mode == "down":
                record({"kind": "refused", "path": self.path})
                return self.answer(503, b"down for maintenance")
            if self.path == "/webhook":
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    payload = hook.verify(body, headers)
                except WebhookVerificationError as e:
                    record({"kind": "rejected", "error": str(e), "id": headers.get("webhook-id")})
                    return self.answer(400, b"bad signature")
                wid = headers["webhook-id"]
                with LOCK:
                    replay = wid in SEEN
                    SEEN.add(wid)
                v = SCHEMA["validator"]
                problems = [f"{list(e.path)}: {e.message}" for e in v.iter_errors(payload)] if v else []
                record({"kind": "replay" if replay else "webhook", "id": wid, "payload": payload,
                        "schema_problems": problems, "schema_checked": v is not None})
                return self.answer(200)
            if self.path == "/slack":
                msg = json.loads(body)
                record({"kind": "slack", "problems": slack_problems(msg), "message": msg})
                return self.answer(200)
            self.answer(404)

    return Handler


class Mailbox:
    async def handle_DATA(self, server, session, envelope):
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        parts = {}
        for part in msg.walk():
            if part.get_content_maintype() == "text":
                parts[part.get_content_subtype()] = part.get_content()
        record({
            "kind": "mail",
            "from": envelope.mail_from,
            "to": sorted(envelope.rcpt_tos),
            "subject": str(msg["subject"]),
            "message_id": str(msg["message-id"]),
            "text": parts.get("plain", ""),
            "html": parts.get("html", ""),
            # STARTTLS sets the session's; TLS from the first byte is the transport's own.
            "tls": session.ssl is not None
            or server.transport.get_extra_info("ssl_object") is not None,
        })
        return "250 Message accepted for delivery"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--secret", required=True)
    p.add_argument("--ca-out", required=True)
    args = p.parse_args()
    http = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(args.secret))
    http.daemon_threads = True
    ca = trustme.CA()
    ca.cert_pem.write_to_path(args.ca_out)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(tls)
    ports = {"http": http.server_address[1]}
    servers = []
    for name, kwargs in [
        ("smtp", {}),
        ("smtp_starttls", {"require_starttls": True, "tls_context": tls}),
        ("smtp_tls", {"ssl_context": tls}),
    ]:
        # aiosmtpd checks its server by connecting to the port it was given: give it a free one.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports[name] = s.getsockname()[1]
        c = Controller(Mailbox(), hostname="127.0.0.1", port=ports[name], **kwargs)
        c.start()
        servers.append(c)
    print(json.dumps(ports), flush=True)
    try:
        http.serve_forever()
    finally:
        for c in servers:
            c.stop()


if __name__ == "__main__":
    sys.exit(main())
