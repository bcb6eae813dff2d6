#!/usr/bin/env python3
"""Rebuild src/base/podcap/instance-info.jsonl from `aws ec2 describe-instance-types` output.

    aws ec2 describe-instance-types --output json > types.json
    python3 tools/instance-table.py types.json > src/base/podcap/instance-info.jsonl

One JSON object per line, sorted by type, in nodeadm's format: the ENIs of the type's default
network card (NetworkCards[DefaultNetworkCardIndex].MaximumNetworkInterfaces) and its IPv4
addresses per ENI. Types without that card or with no ENI or address are left out (nodeadm
refuses them too). Several files (one per Region) are merged; a type given twice with different
numbers is an error.
"""
import json
import sys


def rows(doc):
    for t in doc.get("InstanceTypes", []):
        net = t.get("NetworkInfo") or {}
        index = net.get("DefaultNetworkCardIndex", 0)
        cards = [c for c in net.get("NetworkCards") or [] if c.get("NetworkCardIndex", 0) == index]
        enis = cards[0].get("MaximumNetworkInterfaces", 0) if cards else 0
        ips = net.get("Ipv4AddressesPerInterface", 0)
        if enis > 0 and ips > 0:
            yield t["InstanceType"], enis, ips


def main(paths):
    table = {}
    for p in paths or ["-"]:
        with (sys.stdin if p == "-" else open(p)) as f:
            for name, enis, ips in rows(json.load(f)):
                if table.setdefault(name, (enis, ips)) != (enis, ips):
                    sys.exit(f"{name}: {table[name]} and {(enis, ips)} in different inputs")
    for name in sorted(table):
        enis, ips = table[name]
        line = {"instanceType": name, "defaultMaxENIs": enis, "ipv4AddressesPerInterface": ips}
        print(json.dumps(line, separators=(",", ":")))


if __name__ == "__main__":
    main(sys.argv[1:])
