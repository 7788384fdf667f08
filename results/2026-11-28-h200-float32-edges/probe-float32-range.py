"""Float32 data over its own range, 2^28 samples, from Python on the GPU: numpy's float32 edges
counted as range bins (what the package did before) against the even bins with edges computed in
float32 (now), each checked against numpy on a host copy first; GPU time of ten calls back to back
(CUDA events), median of 15; the range given as float32 scalars so that no min/max pass is timed;
the yardstick is torch.sum over the same bytes. Then the whole call with the data's range."""
import time, numpy as np, torch, tally

def gpu_ms(fn, reps=10, runs=15):
    fn(); torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps): fn()
        b.record(); torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / reps)
    return float(np.median(times))

n = 1 << 28
rng = np.random.default_rng(20261128)
print("device", torch.cuda.get_device_name(), "torch", torch.__version__)
for dist in ("uniform [0, 1000)", "normal(1234.5, 37)", "lognormal"):
    if dist.startswith("uniform"): host = (rng.random(n, dtype=np.float32) * 1000).astype(np.float32)
    elif dist.startswith("normal"): host = rng.normal(1234.5, 37.0, n).astype(np.float32)
    else: host = rng.lognormal(0.0, 1.0, n).astype(np.float32)
    x = torch.from_numpy(host).cuda()
    yard = gpu_ms(lambda: torch.sum(x))
    lo, hi = host.min(), host.max()
    for bins in (256, 4096, 16384, 65536):
        edges = np.histogram_bin_edges(host[:2], bins, range=(lo, hi))  # numpy's float32 arithmetic
        want = np.histogram(host, bins, range=(lo, hi))[0]
        _, even = tally._plan("float32", bins, (lo, hi), None)
        by_range = lambda: tally.histogram(x, edges)  # range bins over numpy's edges
        by_even = lambda: tally.histogram(x, bins, range=(lo, hi))
        whole = lambda: tally.histogram(x, bins)
        for name, fn in (("range bins over numpy's edges", by_range), ("even bins, edges in float32", by_even),
                         ("tally.histogram(x, bins): min/max, then even bins", whole)):
            got = fn()[0].cpu().numpy()
            assert np.array_equal(got, want), (dist, bins, name)
            ms = gpu_ms(fn)
            print(f"{dist:20s} bins={bins:6d} float32_rule={bool(even and even[3])!s:5s} {name:52s} {ms:7.4f} ms  fraction {yard / ms:.3f}")
    del x; torch.cuda.empty_cache()
