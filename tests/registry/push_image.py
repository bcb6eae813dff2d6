"""Push a small image to a registry over the Docker Registry HTTP API V2 (no client tool):
one layer (a gzip'd tar holding one file), an image config, a schema-2 manifest.

Usage: python3 push_image.py <https://host:port> <repository> <tag> <ca file>
Prints the manifest's digest.
"""

import gzip
import hashlib
import io
import json
import ssl
import sys
import tarfile
import urllib.request


def layer():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = b"pulled through the mirror eks-nodeinit configured\n"
        info = tarfile.TarInfo("hello.txt")
        info.size = len(data)
        info.mtime = 0
        tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    return gzip.compress(raw, mtime=0), "sha256:" + hashlib.sha256(raw).hexdigest()


def digest(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def main():
    base, repo, tag, ca = sys.argv[1:5]
    ctx = ssl.create_default_context(cafile=ca)

    def call(method, url, body=None, headers=None):
        req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
        return urllib.request.urlopen(req, context=ctx, timeout=30)

    def put_blob(blob):
        r = call("POST", f"{base}/v2/{repo}/blobs/uploads/", b"")
        location = r.headers["Location"]
        if location.startswith("/"):
            location = base + location
        sep = "&" if "?" in location else "?"
        call("PUT", f"{location}{sep}digest={digest(blob)}", blob,
             {"Content-Type": "application/octet-stream"})

    gz, diff_id = layer()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "config": {},
    }).encode()
    put_blob(gz)
    put_blob(config)
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                   "size": len(config), "digest": digest(config)},
        "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                    "size": len(gz), "digest": digest(gz)}],
    }).encode()
    call("PUT", f"{base}/v2/{repo}/manifests/{tag}", manifest,
         {"Content-Type": "application/vnd.docker.distribution.manifest.v2+json"})
    print(digest(manifest))


if __name__ == "__main__":
    main()
