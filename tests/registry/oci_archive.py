"""Write an OCI image archive for `ctr images import`: the layer and config push_image.py
makes, with a program as the image's command, named by `io.containerd.image.name`.

Usage: python3 oci_archive.py <out.tar> <image name> <program>
"""

import hashlib
import io
import json
import sys
import tarfile

from push_image import OCI, digest, image_config, image_manifest, layer


def main():
    out, name, program = sys.argv[1:4]
    gz, diff_id = layer(program)
    config = image_config([diff_id], program)
    manifest = image_manifest(config, [gz], OCI)
    index = json.dumps({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": OCI[0],
            "size": len(manifest), "digest": digest(manifest),
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"io.containerd.image.name": name},
        }],
    }).encode()
    files = [("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'), ("index.json", index)]
    files += [("blobs/sha256/" + hashlib.sha256(b).hexdigest(), b) for b in (gz, config, manifest)]
    with tarfile.open(out, mode="w") as tar:
        for path, data in files:
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


if __name__ == "__main__":
    main()
