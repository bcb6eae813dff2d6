#!/usr/bin/env python3
"""Rebuild src/base/podcap/instance-info.jsonl from `aws ec2 describe-instance-types` output.

    aws ec2 describe-instance-types --output json > types.json
    python3 tools/instance-table.py types.json > src/base/podcap/instance-info.jsonl

One JSON object per line, sorted by type, in nodeadm's format: the ENIs of the type's default
network card (NetworkCards[DefaultNetworkCardIndex].MaximumNetworkInterfaces) and its IPv4
addresses per ENI, and the type's vCPUs (VCpuInfo.DefaultVCpus) as `defaultVCpus` where the
input has them (`max-pods` derives the ceiling and the CPU reservation from them). Types
without that card or with no ENI or address are left out (nodeadm refuses them too). Several
files (one per Region) are merged; a type given twice with different numbers is an error.

An input may also be this table itself (JSON lines: its rows are kept as they are), or a
DescribeInstanceTypes capture keyed by type (a JSON object of the API's entries, gzip or not).
`--vcpus-from FILE` (repeatable) takes only the vCPUs from FILE, for the rows that lack them:
a second capture of the same API fills the table's gaps without changing its ENI numbers, and
each type whose ENI numbers it gives otherwise is named on stderr.

    python3 tools/instance-table.py --vcpus-from instance_types.json.gz \\
        src/base/podcap/instance-info.jsonl > new.jsonl
"""
import gzip
import json
import sys


def load(path):
    """The file's text: stdin for `-`, gunzipped when it is gzip."""
    if path == "-":
        return sys.stdin.read()
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8")


def entries(text):
    """DescribeInstanceTypes entries, or this table's rows, from one input's text."""
    text = text.strip()
    if text.startswith("{\"instanceType\""):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    doc = json.loads(text)
    if "InstanceTypes" in doc:
        return doc["InstanceTypes"]
    return list(doc.values())


def row(t):
    """(type, (ENIs, IPv4 per ENI), vCPUs or None), or None for a type nodeadm refuses."""
    if "instanceType" in t:
        numbers = (t["defaultMaxENIs"], t["ipv4AddressesPerInterface"])
        return t["instanceType"], numbers, t.get("defaultVCpus")
    net = t.get("NetworkInfo") or {}
    index = net.get("DefaultNetworkCardIndex", 0)
    cards = [c for c in net.get("NetworkCards") or [] if c.get("NetworkCardIndex", 0) == index]
    enis = cards[0].get("MaximumNetworkInterfaces", 0) if cards else 0
    ips = net.get("Ipv4AddressesPerInterface", 0)
    vcpus = (t.get("VCpuInfo") or {}).get("DefaultVCpus")
    if enis > 0 and ips > 0:
        return t["InstanceType"], (enis, ips), vcpus
    return None


def rows(path):
    for t in entries(load(path)):
        r = row(t)
        if r is not None:
            yield r


def main(args):
    extra, paths = [], []
    while args:
        a = args.pop(0)
        if a == "--vcpus-from":
            extra.append(args.pop(0))
        else:
            paths.append(a)
    table, vcpus = {}, {}
    for p in paths or ["-"]:
        for name, numbers, cpus in rows(p):
            if table.setdefault(name, numbers) != numbers:
                sys.exit(f"{name}: {table[name]} and {numbers} in different inputs")
            if cpus is not None and vcpus.setdefault(name, cpus) != cpus:
                sys.exit(f"{name}: {vcpus[name]} and {cpus} vCPUs in different inputs")
    for p in extra:
        for name, numbers, cpus in rows(p):
            if name not in table or cpus is None:
                continue
            if table[name] != numbers:
                print(f"{name}: ENIs {numbers} in {p}, {table[name]} kept", file=sys.stderr)
            vcpus.setdefault(name, cpus)
    for name in sorted(table):
        enis, ips = table[name]
        line = {"instanceType": name, "defaultMaxENIs": enis, "ipv4AddressesPerInterface": ips}
        if name in vcpus:
            line["defaultVCpus"] = vcpus[name]
        print(json.dumps(line, separators=(",", ":")))


if __name__ == "__main__":
    main(sys.argv[1:])
