"""Serve a realistic cluster until stdin closes:

    python -m tests.support.kubeapi --nodes 2000 --pods 60000 --token T --tls DIR

Prints the server's URL and the bytes of node and pod JSON it holds on its first line of
stdout; with --tls, also writes DIR/ca.crt. The benchmark runs the server as its own
process so that the clients it measures start from a small parent (Linux counts a
parent's memory at fork in a child's peak RSS).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.support.kubeapi.api import KubeAPI
from tests.support.kubeapi.objects import cloud_name, realistic_cluster, realistic_pods, short_name
from tests.support.kubeapi.serving import serve


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.kubeapi")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=0, help="realistic pods over the nodes")
    parser.add_argument("--token", help="require this bearer token (its user may do anything)")
    parser.add_argument("--tls", metavar="DIR", help="serve https; write the CA to DIR/ca.crt")
    parser.add_argument("--names", choices=("cloud", "short"), default="cloud")
    args = parser.parse_args(argv)
    api = KubeAPI()
    if args.token:
        api.add_admin(args.token, "bench")
    else:
        api.grant("system:unauthenticated", "*", "*")
    nodes = realistic_cluster(args.nodes, name=cloud_name if args.names == "cloud" else short_name)
    api.set_nodes(nodes)
    if args.pods:
        api.load_encoded("pods", realistic_pods(nodes, args.pods))
    del nodes
    ca = None
    if args.tls:
        import trustme

        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(Path(args.tls) / "ca.crt"))
    with serve(api, tls=ca):
        tables = api.store.tables
        node_bytes = sum(len(s.body) for s in tables["nodes"].objects.values())
        pod_bytes = sum(len(s.body) for s in tables["pods"].objects.values())
        print(api.url, node_bytes, pod_bytes, flush=True)
        sys.stdin.read()  # until the parent closes our stdin or goes away


if __name__ == "__main__":
    main()
