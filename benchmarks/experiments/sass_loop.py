"""Opcode counts of a generated kernel's largest loop, on a machine without a GPU: NVRTC (cuda-bindings) builds
the cubin for sm_90, nvdisasm and cuobjdump from the nvidia-cuda-nvdisasm / nvidia-cuda-cuobjdump wheels read it.

    stencilforge show-kernel wave3d --strategy streaming_vec > k.cu
    python benchmarks/experiments/sass_loop.py k.cu [-v]     (-v: print the loop's non-FFMA instructions)

Round 10 (docs/performance.md) counted streaming_vec's two-plane trip with it: 747 instructions at 2b709b0.
"""
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import nvidia

from stencilforge.backends.cuda.compile import compile_cubin

tools = next(Path(p) for p in nvidia.__path__ if list(Path(p).glob("*/bin/nvdisasm")))
nvdisasm, cuobjdump = (str(next(tools.glob(f"*/bin/{t}"))) for t in ("nvdisasm", "cuobjdump"))
with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
    f.write(compile_cubin(Path(sys.argv[1]).read_text(), "sm_90", sys.argv[1]))
    f.flush()
    text = subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True, check=True).stdout
    print(subprocess.run([cuobjdump, "-res-usage", f.name], capture_output=True, text=True).stdout.strip().splitlines()[-1].strip())

labels, instrs = {}, []
for line in text.splitlines():
    if m := re.match(r"\s*(\.L_x_\d+):", line):
        labels[m.group(1)] = len(instrs)
    elif m := re.match(r"\s*/\*[0-9a-f]{4}\*/\s+(.*?)\s*;?\s*$", line):
        instrs.append(m.group(1))
loops = [(labels[m.group(1)], i) for i, ins in enumerate(instrs) if (m := re.search(r"BRA.*`\((\.L_x_\d+)\)", ins)) and labels.get(m.group(1), i + 1) <= i]
start, end = max(loops, key=lambda se: se[1] - se[0])
ops = collections.Counter(re.match(r"(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", ins).group(1) for ins in instrs[start:end + 1])
print(f"{len(instrs)} instructions; largest loop {end - start + 1}:", dict(ops.most_common()))
if "-v" in sys.argv:
    print("\n".join(ins for ins in instrs[start:end + 1] if not ins.startswith("FFMA")))
