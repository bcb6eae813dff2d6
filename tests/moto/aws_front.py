"""STS and EC2 by their real names, for the control-plane suite's aws-iam-authenticator.

The authenticator accepts a token only for its partition's STS host names and calls that host
over https; it finds a node's private DNS name by calling EC2 by its name. This front serves
both names (`sts.<region>.amazonaws.com`, `ec2.<region>.amazonaws.com`, which the suite's
/etc/hosts points here) over TLS with a certificate of the suite's CA, and:

* STS `GetCallerIdentity` presigned in the query (the token's URL, with the `x-k8s-aws-id` header
  the authenticator adds): checked as STS checks it, with botocore's SigV4 (not the agent's
  signer): the credential's scope, the access key and its session token, the 15 minutes either
  side of `X-Amz-Date`, then the signature over the headers the URL says it signed, with the
  values this request carries. A refusal is STS's: 403 with `SignatureDoesNotMatch`,
  `InvalidClientTokenId`, ... in the JSON error the authenticator asked for. A good call is
  answered by moto's STS (told the caller by an `Authorization` header naming the access key, as
  moto reads it), its XML turned into the JSON the authenticator parses.
* EC2: forwarded to moto as it came (moto checks no signature).

Every call is one JSON line in `--calls` (service, path, action, access key, x-k8s-aws-id,
status, code). The secret of each access key comes from `--secrets` (a JSON object the suite rewrites
as it makes roles: {"AKID": {"secret": ..., "token": ...}}), read at each call.

Before listening it signs AWS's published SigV4 example (IAM ListUsers, "Create a signed AWS API
request") with the code that checks tokens, and exits 2 if that is not AWS's signature.

Usage: python3 aws_front.py --listen ADDR --region R --moto URL --cert C --key K
                            --secrets FILE --calls FILE
"""

import argparse
import datetime
import hmac
import json
import socket
import ssl
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

SKEW = datetime.timedelta(minutes=15)
AMZ_DATE = "%Y%m%dT%H%M%SZ"
NEEDED = (
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
)
# moto on the suite's loopback: never through a proxy the environment names.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check "
    "your AWS Secret Access Key and signing method. Consult the service documentation for "
    "details."
)


class Refused(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def signature(host, params, headers, secret, token, scope, amz_date):
    """botocore's SigV4 signature of `GET https://host/?params` with `headers` (the signed ones,
    lowercase names): the query canonicalised from the decoded values, as a server does."""
    key, _, region, service, _ = scope
    req = AWSRequest(method="GET", url=f"https://{host}/", params=params, headers=headers)
    req.context["timestamp"] = amz_date
    auth = SigV4Auth(Credentials(key, secret, token), service, region)
    canonical = auth.canonical_request(req)
    return auth.signature(auth.string_to_sign(req, canonical), req)


def self_test():
    """AWS's published example: GET iam ListUsers at 20150830T123600Z with AKIDEXAMPLE."""
    want = "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
    got = signature(
        "iam.amazonaws.com",
        {"Action": "ListUsers", "Version": "2010-05-08"},
        {
            "content-type": "application/x-www-form-urlencoded; charset=utf-8",
            "host": "iam.amazonaws.com",
            "x-amz-date": "20150830T123600Z",
        },
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        None,
        ("AKIDEXAMPLE", "20150830", "us-east-1", "iam", "aws4_request"),
        "20150830T123600Z",
    )
    if got != want:
        sys.exit(f"aws_front: SigV4 self-test failed: {got} is not AWS's {want}")


def check(pairs, headers, secrets, region, now):
    """The presigned GetCallerIdentity as STS checks it: the access key, or `Refused`."""
    params = {}
    for k, v in pairs:
        if k in params:
            raise Refused(400, "InvalidParameterValue", f"duplicate query parameter {k}")
        params[k] = v
    missing = [k for k in NEEDED if k not in params]
    if missing:
        raise Refused(400, "IncompleteSignature", f"missing {', '.join(missing)}")
    if params["X-Amz-Algorithm"] != "AWS4-HMAC-SHA256":
        raise Refused(400, "IncompleteSignature", "unsupported X-Amz-Algorithm")
    scope = params["X-Amz-Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        raise Refused(400, "IncompleteSignature", "malformed X-Amz-Credential")
    amz_date = params["X-Amz-Date"]
    if scope[3] != "sts":
        raise Refused(403, "SignatureDoesNotMatch", "Credential should be scoped to correct service: 'sts'.")
    if scope[2] != region:
        raise Refused(403, "SignatureDoesNotMatch", "Credential should be scoped to a valid region.")
    if scope[1] != amz_date[:8]:
        raise Refused(403, "SignatureDoesNotMatch", "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP")
    known = secrets.get(scope[0])
    if known is None or params.get("X-Amz-Security-Token") != known.get("token"):
        raise Refused(403, "InvalidClientTokenId", "The security token included in the request is invalid.")
    try:
        signed_at = datetime.datetime.strptime(amz_date, AMZ_DATE).replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        raise Refused(400, "IncompleteSignature", f"X-Amz-Date {amz_date} is not ISO-8601 basic")
    stamp = now.strftime(AMZ_DATE)
    if signed_at > now + SKEW:
        raise Refused(403, "SignatureDoesNotMatch", f"Signature not yet current: {amz_date} is still later than {(now + SKEW).strftime(AMZ_DATE)} ({stamp} + 15 min.)")
    if signed_at < now - SKEW:
        raise Refused(403, "SignatureDoesNotMatch", f"Signature expired: {amz_date} is now earlier than {(now - SKEW).strftime(AMZ_DATE)} ({stamp} - 15 min.)")
    names = params["X-Amz-SignedHeaders"].split(";")
    if any(n not in headers for n in names):
        raise Refused(403, "SignatureDoesNotMatch", MISMATCH)
    signed = {n: headers[n] for n in names}
    unsigned = {k: v for k, v in params.items() if k != "X-Amz-Signature"}
    want = signature(headers["host"], unsigned, signed, known["secret"], known.get("token"), scope, amz_date)
    if not hmac.compare_digest(want, params["X-Amz-Signature"]):
        raise Refused(403, "SignatureDoesNotMatch", MISMATCH)
    return scope[0]


def caller_identity(moto, key, region):
    """moto's GetCallerIdentity for the caller `key`, as the JSON STS answers."""
    auth = f"AWS4-HMAC-SHA256 Credential={key}/20260101/{region}/sts/aws4_request, SignedHeaders=host, Signature=0"
    req = urllib.request.Request(f"{moto}/?Action=GetCallerIdentity&Version=2011-06-15", headers={"Authorization": auth})
    try:
        with DIRECT.open(req, timeout=10) as r:
            root = ET.fromstring(r.read())
    except (urllib.error.URLError, OSError, ET.ParseError) as e:
        raise Refused(500, "InternalFailure", f"moto's GetCallerIdentity: {e}")
    text = {el.tag.split("}")[-1]: (el.text or "") for el in root.iter()}
    result = {k: text.get(k, "") for k in ("Account", "Arn", "UserId")}
    meta = {"RequestId": text.get("RequestId", "")}
    return {"GetCallerIdentityResponse": {"GetCallerIdentityResult": result, "ResponseMetadata": meta}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, status, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def record(self, **call):
        with self.server.lock, open(self.server.args.calls, "a") as f:
            f.write(json.dumps(call) + "\n")

    def host(self):
        return (self.headers.get("Host") or "").split(":")[0].lower()

    def do_GET(self):
        a = self.server.args
        if self.host() != f"sts.{a.region}.amazonaws.com":
            return self.reply(404, {"Error": {"Code": "NotFound", "Message": self.host()}})
        url = urllib.parse.urlsplit(self.path)
        pairs = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
        action = dict(pairs).get("Action", "")
        key = dict(pairs).get("X-Amz-Credential", "").split("/")[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        call = {"service": "sts", "path": url.path, "action": action, "key": key, "cluster": headers.get("x-k8s-aws-id")}
        try:
            if url.path != "/" or action != "GetCallerIdentity":
                raise Refused(400, "InvalidAction", f"{url.path} {action}: not GetCallerIdentity on /")
            with open(a.secrets) as f:
                secrets = json.load(f)
            now = datetime.datetime.now(datetime.timezone.utc)
            check(pairs, headers, secrets, a.region, now)
            answer = caller_identity(a.moto, key, a.region)
        except Refused as r:
            self.record(**call, status=r.status, code=r.code, message=r.message)
            error = {"Error": {"Code": r.code, "Message": r.message, "Type": "Sender"}, "RequestId": str(uuid.uuid4())}
            return self.reply(r.status, error)
        self.record(**call, status=200, code="", arn=answer["GetCallerIdentityResponse"]["GetCallerIdentityResult"]["Arn"])
        self.reply(200, answer)

    def do_POST(self):
        a = self.server.args
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.host() != f"ec2.{a.region}.amazonaws.com":
            return self.reply(404, {"Error": {"Code": "NotFound", "Message": self.host()}})
        fwd = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type", "x-amz-date", "x-amz-security-token")}
        req = urllib.request.Request(f"{a.moto}/", data=body, headers=fwd, method="POST")
        try:
            with DIRECT.open(req, timeout=10) as r:
                status, ctype, out = r.status, r.headers.get("Content-Type", "text/xml"), r.read()
        except urllib.error.HTTPError as e:
            status, ctype, out = e.code, e.headers.get("Content-Type", "text/xml"), e.read()
        except (urllib.error.URLError, OSError) as e:
            status, ctype, out = 502, "text/plain", f"moto: {e}".encode()
        action = dict(urllib.parse.parse_qsl(body.decode(errors="replace"))).get("Action", "")
        key = (self.headers.get("Authorization") or "").partition("Credential=")[2].split("/")[0]
        self.record(service="ec2", path=self.path, action=action, key=key, cluster=None, status=status, code="")
        self.reply(status, out, ctype)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, args, tls):
        super().__init__((args.listen, 443), Handler)
        self.args, self.tls, self.lock = args, tls, threading.Lock()

    def finish_request(self, request, client_address):
        # TLS in the request's thread: a client that only checks the handshake (the agent's
        # reachability check) or stalls holds no one else up. No Nagle: answers go at once.
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        request.settimeout(30)
        try:
            conn = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        with conn:
            super().finish_request(conn, client_address)


def main():
    p = argparse.ArgumentParser()
    for flag in ("--listen", "--region", "--moto", "--cert", "--key", "--secrets", "--calls"):
        p.add_argument(flag, required=True)
    args = p.parse_args()
    self_test()
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(args.cert, args.key)
    Server(args, tls).serve_forever()


if __name__ == "__main__":
    main()
