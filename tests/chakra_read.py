"""Reads `ina3d export chakra` output with MLCommons' own reader (PyPI mlc-chakra 1.0.0):
its generated et_def_pb2 messages and protolib's length-delimited decoding. Prints, per
rank, the facts tests/chakra.rs checks against `ina3d inspect` of the same job's trace.

usage: python chakra_read.py DIR PREFIX  ->  JSON {"ranks": [...], "groups": {...}}
"""
import json
import sys

from chakra.schema.protobuf.et_def_pb2 import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    GlobalMetadata,
    Node,
)
from chakra.src.third_party.utils.protolib import decodeMessage, openFileRd


def read(path):
    f = openFileRd(path)
    meta = GlobalMetadata()
    if not decodeMessage(f, meta):
        raise SystemExit(f"{path}: no GlobalMetadata")
    nodes = []
    while True:
        n = Node()
        if not decodeMessage(f, n):
            break
        nodes.append(n)
    f.close()
    return meta, nodes


def main():
    d, prefix, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(f"{d}/{prefix}.comm_group.json") as g:
        groups = json.load(g)
    ranks = []
    for r in range(world):
        meta, nodes = read(f"{d}/{prefix}.{r}.et")
        seen = set()
        out = {"version": meta.version, "comp": 0, "coll": [], "send": [], "recv": [],
               "deps_backward": True, "ids_unique": True}
        for n in nodes:
            out["ids_unique"] &= n.id not in seen
            out["deps_backward"] &= all(x in seen for x in n.data_deps)
            seen.add(n.id)
            a = {x.name: x for x in n.attr}
            if n.type == COMP_NODE:
                out["comp"] += 1
            elif n.type == COMM_COLL_NODE:
                out["coll"].append([a["comm_type"].int64_val, a["comm_size"].int64_val,
                                    a["pg_name"].string_val])
            elif n.type in (COMM_SEND_NODE, COMM_RECV_NODE):
                key = "send" if n.type == COMM_SEND_NODE else "recv"
                out[key].append([a["comm_src"].int32_val, a["comm_dst"].int32_val,
                                 a["comm_tag"].int32_val, a["comm_size"].int64_val])
        ranks.append(out)
    json.dump({"ranks": ranks, "groups": groups}, sys.stdout)


main()
