"""The units the files speak and the model computes in: one definition each (SI prefixes, IEC 80000-13 for GiB).

Cluster files give FLOP/s in TFLOP/s, capacities in GiB (HBM capacity is binary), bandwidths in GB/s (links
and HBM are rated in decimal units) and latencies in microseconds; the model works in FLOP/s, bytes,
bytes/s and seconds.
"""
TERA = 1e12       # TFLOP/s -> FLOP/s
GIB = 2 ** 30     # GiB -> bytes
GB = 1e9          # GB/s -> bytes/s
US_PER_S = 1e6    # microseconds per second
