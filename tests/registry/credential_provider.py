#!/usr/bin/env python3
"""A kubelet image credential provider for the control-plane suite: reads a
CredentialProviderRequest on stdin, logs it (one JSON line to $CREDENTIAL_LOG), answers a
CredentialProviderResponse with $REGISTRY_USER / $REGISTRY_PASSWORD for the registry named by
`--registry=HOST:PORT` (its args), in the request's API version.
"""

import json
import os
import sys


def main():
    request = json.load(sys.stdin)
    registry = next(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--registry="))
    with open(os.environ["CREDENTIAL_LOG"], "a") as log:
        log.write(json.dumps({"image": request.get("image"), "apiVersion": request.get("apiVersion"),
                              "args": sys.argv[1:]}) + "\n")
    json.dump({
        "apiVersion": request["apiVersion"],
        "kind": "CredentialProviderResponse",
        "cacheKeyType": "Registry",
        "cacheDuration": "0s",
        "auth": {registry: {"username": os.environ["REGISTRY_USER"],
                            "password": os.environ["REGISTRY_PASSWORD"]}},
    }, sys.stdout)


if __name__ == "__main__":
    main()
