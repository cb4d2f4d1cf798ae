"""Opcode histogram of the streaming_vec kernels in every cubin under a directory (the kernel cache,
STENCILFORGE_CACHE_DIR), with cuobjdump from the CUDA toolkit: sass_histogram.py DIR"""
import collections, glob, re, subprocess, sys
for path in sorted(glob.glob(sys.argv[1] + "/**/*", recursive=True)):
    try:
        text = subprocess.run(["cuobjdump", "-sass", path], capture_output=True, text=True, timeout=60).stdout
    except Exception:
        continue
    for fn in re.split(r"\n\s*Function : ", text)[1:]:
        name = fn.split("\n", 1)[0].strip()
        if "streaming_vec" not in name:
            continue
        ops = collections.Counter()
        for line in fn.splitlines():
            m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
            if m:
                ops[m.group(1).split(".")[0]] += 1
        print(path.rsplit("/", 1)[-1][:16], name, "total", sum(ops.values()), dict(ops.most_common(25)))
