"""Push a small image to a registry over the Docker Registry HTTP API V2 (no client tool):
one layer (a gzip'd tar holding one file), an image config, a schema-2 manifest.

Usage: python3 push_image.py <https://host:port> <repository> <tag> <ca file> [<program>]
With a program, the layer holds it too, as /<its name> (mode 0755), and it is the image's
command. `http://…` and `-` for the CA: plain HTTP. REGISTRY_AUTH=user:password: basic auth.
PUSH_LAYERS=COUNTxMIB: instead, COUNT layers each holding MIB MiB of random bytes (the pull
bench's image: incompressible, so the gzip'd layers are as large as their files).
Prints the manifest's digest.
"""

import base64
import gzip
import hashlib
import io
import json
import os
import ssl
import sys
import tarfile
import urllib.request


def layer(program=None):
    """The layer (gzip'd) and its diff ID: hello.txt, and `program` at the root if given."""
    files = [("hello.txt", b"pulled through the mirror eks-nodeinit configured\n", 0o644)]
    if program:
        with open(program, "rb") as f:
            files.append((program.rsplit("/", 1)[-1], f.read(), 0o755))
    return tar_gz(files)


def random_layers(spec):
    """`COUNTxMIB`: COUNT (gzip'd layer, diff ID) pairs, each a file of MIB MiB of random bytes."""
    count, mib = (int(n) for n in spec.split("x"))
    return [tar_gz([(f"random-{i}.bin", os.urandom(mib << 20), 0o644)], level=1)
            for i in range(count)]


def tar_gz(files, level=9):
    """A tar of `files` (name, bytes, mode), gzip'd at `level`, and its diff ID."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data, mode in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            info.mode = mode
            tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    return gzip.compress(raw, compresslevel=level, mtime=0), digest(raw)


def digest(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def image_config(diff_ids, program):
    """The image config: linux/amd64, the layers' diff IDs, the program as its command."""
    return json.dumps({
        "architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "config": {"Cmd": ["/" + program.rsplit("/", 1)[-1]]} if program else {},
    }).encode()


# The media types of a manifest, its config and its layer: Docker's schema 2, and OCI's.
DOCKER = ("application/vnd.docker.distribution.manifest.v2+json",
          "application/vnd.docker.container.image.v1+json",
          "application/vnd.docker.image.rootfs.diff.tar.gzip")
OCI = ("application/vnd.oci.image.manifest.v1+json",
       "application/vnd.oci.image.config.v1+json",
       "application/vnd.oci.image.layer.v1.tar+gzip")


def image_manifest(config, gzs, types):
    """The manifest of one config and the gzip'd layers, with `types` (DOCKER or OCI)."""
    return json.dumps({
        "schemaVersion": 2,
        "mediaType": types[0],
        "config": {"mediaType": types[1], "size": len(config), "digest": digest(config)},
        "layers": [{"mediaType": types[2], "size": len(gz), "digest": digest(gz)} for gz in gzs],
    }).encode()


def main():
    base, repo, tag, ca = sys.argv[1:5]
    program = sys.argv[5] if len(sys.argv) > 5 else None
    ctx = None if ca == "-" else ssl.create_default_context(cafile=ca)
    auth = {}
    if os.environ.get("REGISTRY_AUTH"):
        token = base64.b64encode(os.environ["REGISTRY_AUTH"].encode()).decode()
        auth = {"Authorization": "Basic " + token}

    def call(method, url, body=None, headers=None):
        req = urllib.request.Request(url, data=body, method=method,
                                     headers={**auth, **(headers or {})})
        return urllib.request.urlopen(req, context=ctx, timeout=30)

    def put_blob(blob):
        r = call("POST", f"{base}/v2/{repo}/blobs/uploads/", b"")
        location = r.headers["Location"]
        if location.startswith("/"):
            location = base + location
        sep = "&" if "?" in location else "?"
        call("PUT", f"{location}{sep}digest={digest(blob)}", blob,
             {"Content-Type": "application/octet-stream"})

    spec = os.environ.get("PUSH_LAYERS")
    layers = random_layers(spec) if spec else [layer(program)]
    config = image_config([d for _, d in layers], program)
    for gz, _ in layers:
        put_blob(gz)
    put_blob(config)
    manifest = image_manifest(config, [gz for gz, _ in layers], DOCKER)
    call("PUT", f"{base}/v2/{repo}/manifests/{tag}", manifest,
         {"Content-Type": "application/vnd.docker.distribution.manifest.v2+json"})
    print(digest(manifest))


if __name__ == "__main__":
    main()
