#!/usr/bin/env python3
"""Rebuild src/base/accelerators.tsv from DescribeInstanceTypes output.

    aws ec2 describe-instance-types --output json > types.json
    python3 tools/accelerator-table.py types.json > src/base/accelerators.tsv

A file may also be a map of type name to its DescribeInstanceTypes item, gzipped or not (the
shape moto ships in moto/ec2/resources/instance_types.json.gz, which the checked-in table was
built from: moto 5.2.1, from PyPI). One line per type with NVIDIA GPUs or EFA, sorted by type:
the type, its NVIDIA GPUs (GpuInfo.Gpus[].Count where Manufacturer is NVIDIA: whole devices on
PCI; a type that shares a GPU in partitions, GpuPartitionSize below 1, counts 0, as its device
is a virtual function), and NetworkInfo.EfaInfo.MaximumEfaInterfaces (0 without EFA). The
attached EFA interfaces are what DescribeInstances says of the instance; this maximum only says
whether to ask. Several files are merged; a type given twice with different numbers is an error.
"""
import gzip
import json
import sys


def items(doc):
    if isinstance(doc, dict) and "InstanceTypes" in doc:
        return doc["InstanceTypes"]
    if isinstance(doc, dict):
        return [dict(v, InstanceType=k) for k, v in doc.items()]
    return doc


def rows(doc):
    for t in items(doc):
        gpus = 0
        for g in (t.get("GpuInfo") or {}).get("Gpus") or []:
            if g.get("Manufacturer") == "NVIDIA" and g.get("GpuPartitionSize", 1) >= 1:
                gpus += g.get("Count", 0)
        efa = ((t.get("NetworkInfo") or {}).get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)
        if gpus > 0 or efa > 0:
            yield t["InstanceType"], gpus, efa


def load(path):
    raw = sys.stdin.buffer.read() if path == "-" else open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def main(paths):
    table = {}
    for p in paths or ["-"]:
        for name, gpus, efa in rows(load(p)):
            if table.setdefault(name, (gpus, efa)) != (gpus, efa):
                sys.exit(f"{name}: {table[name]} and {(gpus, efa)} in different inputs")
    print("# instance type\tNVIDIA GPUs\tmaximum EFA interfaces (tools/accelerator-table.py)")
    for name in sorted(table):
        gpus, efa = table[name]
        print(f"{name}\t{gpus}\t{efa}")


if __name__ == "__main__":
    main(sys.argv[1:])
