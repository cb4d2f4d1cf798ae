"""What `auto` knows of a GPU: its name, SM count and copy bandwidth, the bandwidth measured once and cached.

A schedule keeps a number of bytes in flight per SM; the bandwidth each SM must
sustain (copy bandwidth / SMs) says how many it needs. An H200 has the H100's
SM count and more bandwidth, so a schedule that saturates one may not the
other: rules in `tune.choose` that depend on this read `gbps_per_sm`.
"""

from __future__ import annotations

import json
import logging
import statistics
from dataclasses import dataclass

from ...cache import cache_dir, write_atomic

log = logging.getLogger(__name__)

COPY_BYTES = 256 << 20  # large enough that a copy runs at the sustained rate (several L2 sizes)


@dataclass(frozen=True)
class DeviceFacts:
    name: str
    sms: int
    copy_gbps: float  # device-to-device copy, bytes read + written per second / 1e9

    @property
    def gbps_per_sm(self) -> float:
        return self.copy_gbps / self.sms


def _measure_copy(cp) -> float:
    """cudaMemcpy device to device, median of 7 event-timed copies after one warm-up."""
    src = cp.ones(COPY_BYTES // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for i in range(8):
        start.record()
        dst.data.copy_from_device_async(src.data, src.nbytes)
        stop.record()
        stop.synchronize()
        if i:
            times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    return 2 * src.nbytes / statistics.median(times) / 1e9


def device_facts(cp, name: str) -> DeviceFacts:
    """The current device's facts; the bandwidth from the cache (keyed by device name and driver), else measured."""
    device = cp.cuda.Device()
    sms = int(device.attributes["MultiProcessorCount"])
    driver = cp.cuda.runtime.driverGetVersion()
    path = cache_dir("cuda") / "bandwidth.json"
    key = f"{name} / driver {driver}"
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    gbps = known.get(key)
    if not isinstance(gbps, (int, float)) or gbps <= 0:
        gbps = _measure_copy(cp)
        known[key] = gbps
        write_atomic(path, json.dumps(known, indent=1).encode())
        log.info("measured the copy bandwidth of %s: %.0f GB/s (cached in %s)", name, gbps, path)
    return DeviceFacts(name, sms, float(gbps))
