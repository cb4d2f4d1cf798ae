"""wave3d r8 streaming chunk lengths at 512^3 and 1024^3 (cuda_profile's timing, its LARGE shape swapped)."""
import sys
sys.path.insert(0, "benchmarks")
import cuda_profile

out = sys.argv[1]
V = ["wave3d:streaming", "wave3d:streaming:128x16x32", "wave3d:streaming:256x16x32", "wave3d:streaming:512x16x32", "wave3d:streaming:256x32x32", "wave3d:peer"]
for n in (512, 1024):
    cuda_profile.LARGE["wave3d"] = (n, n, n)
    cuda_profile.FIELDS.clear()
    print(f"=== wave3d {n}^3", flush=True)
    sys.argv = ["cuda_profile.py", "time", *V, "--json", f"{out}/wave3d_{n}.json"]
    cuda_profile.main()
