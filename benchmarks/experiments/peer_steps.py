"""Run a few steps of one bench peer on one workload (for ncu): peer_steps.py PEER WORKLOAD [SHAPE...]"""
import sys

from stencilforge.bench.peers import PEERS
from stencilforge.bench.workloads import GPU_MATRIX, build_case

peer, name = sys.argv[1], sys.argv[2]
w = next(w for w in GPU_MATRIX if w.name == name)
runner = PEERS[peer].runner(build_case(w))
runner.run(6)
runner.latest()
print("ran", peer, name, w.shape, flush=True)
