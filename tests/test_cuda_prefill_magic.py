"""The float trick that joins the q16 prefill matmul's two integer sums (backends/cuda/matmul_q8mma.cu).

Each 32-column slice of the int8 tensor-core matmul gives two int32 sums: Σh of the weights times
x's high bytes and Σl of the weights times its low bytes, and the slice's value is 256 Σh + Σl
rounded once to float (what the CPU does with its exact int32). The mma accumulates Σh onto the
bits of 1.5 · 2^31 and Σl onto those of 1.5 · 2^23; the kernel then computes
(float(bits_h) - (1.5 · 2^31 + 1.5 · 2^23)) + float(bits_l) in two float32 additions. This checks,
in IEEE float32 on the host (numpy rounds to nearest even, as the GPU's __fsub_rn/__fadd_rn),
that this is exactly float32(256 Σh + Σl) over the whole range the kernel can produce:
|Σh| <= 32 · 128 · 128 (int8 weights times int8 high bytes) and |Σl| <= 32 · 128 · 255.
"""
import numpy as np

MAGIC_LO = 0x4B400000  # bits of 1.5 * 2^23
MAGIC_HI = 0x4F400000  # bits of 1.5 * 2^31
BOTH = np.float32(3221225472.0 + 12582912.0)
SH_MAX = 32 * 128 * 128
SL_MAX = 32 * 128 * 255


def joined(sh: np.ndarray, sl: np.ndarray) -> np.ndarray:
    fh = (np.int32(MAGIC_HI) + sh.astype(np.int32)).view(np.float32)
    fl = (np.int32(MAGIC_LO) + sl.astype(np.int32)).view(np.float32)
    return (fh - BOTH) + fl  # float32 throughout


def exact(sh: np.ndarray, sl: np.ndarray) -> np.ndarray:
    return (256 * sh.astype(np.int64) + sl.astype(np.int64)).astype(np.float32)


def test_both_magics_are_one_exact_float():
    assert float(BOTH) == 771 * 2.0**22
    assert np.array([MAGIC_HI], np.int32).view(np.float32)[0] == 1.5 * 2.0**31
    assert np.array([MAGIC_LO], np.int32).view(np.float32)[0] == 1.5 * 2.0**23


def test_the_high_magic_scales_by_256():
    sh = np.array([-SH_MAX, -1, 0, 1, SH_MAX], np.int64)
    fh = (np.int32(MAGIC_HI) + sh.astype(np.int32)).view(np.float32).astype(np.float64)
    assert np.array_equal(fh - 1.5 * 2.0**31, 256.0 * sh)


def test_joined_sum_is_the_exact_sum_rounded_once_at_the_extremes():
    edges_h = np.array([-SH_MAX, -SH_MAX + 1, -65536, -1, 0, 1, 65535, SH_MAX - 1, SH_MAX], np.int64)
    edges_l = np.array([-SL_MAX, -SL_MAX + 1, -256, -255, -1, 0, 1, 127, 128, 255, 256, SL_MAX - 1, SL_MAX], np.int64)
    sh, sl = (a.ravel() for a in np.meshgrid(edges_h, edges_l))
    assert np.array_equal(joined(sh, sl).view(np.uint32), exact(sh, sl).view(np.uint32))


def test_joined_sum_is_the_exact_sum_rounded_once_where_rounding_happens():
    # Above 2^24 the float32 sum rounds: ties (an odd multiple of half an ulp) must go to even as
    # in the CPU's int32 -> float conversion. Random pairs over the whole range, and pairs whose
    # exact sum is a tie at magnitudes 2^25..2^27.
    rng = np.random.default_rng(0)
    sh = rng.integers(-SH_MAX, SH_MAX + 1, 1_000_000)
    sl = rng.integers(-SL_MAX, SL_MAX + 1, 1_000_000)
    assert np.array_equal(joined(sh, sl).view(np.uint32), exact(sh, sl).view(np.uint32))
    ties_h = rng.integers(2**17, SH_MAX, 20_000) * rng.choice([-1, 1], 20_000)
    ties_l = np.where(rng.random(20_000) < 0.5, 1, 2) + 4 * rng.integers(-1000, 1000, 20_000)
    total = 256 * ties_h + ties_l
    assert (np.abs(total) > 2**24).mean() > 0.5  # most of them past float32's exact integers
    assert np.array_equal(joined(ties_h, ties_l).view(np.uint32), exact(ties_h, ties_l).view(np.uint32))


# Q8's weight scale folded into the magic's subtraction (matmul_q8mma.cu slice_scaled): a fused
# multiply-add is emulated exactly here as float64 a * b + c rounded once to float32 (the product
# and the sum have at most 43 significant bits at these magnitudes, so float64 holds them exactly).
MAGIC_LO_F = np.float32(1.5 * 2.0**23)


def fma32(a, b, c) -> np.ndarray:
    return (np.float64(a) * np.float64(b) + np.float64(c)).astype(np.float32)


def fp16_scales() -> np.ndarray:
    """Every finite fp16 value as float32 (the 32-value blocks' scales), zeros included."""
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    return h[np.isfinite(h)].astype(np.float32)


def kquant_scales(rng) -> np.ndarray:
    """fp16 d times a 6-bit scale (Q4_K, IQ4_XS) or an int8 one (Q6_K): up to 19 significant bits."""
    d = fp16_scales()
    d = d[np.abs(d) > 0]
    return np.concatenate([rng.choice(d, 20_000) * rng.integers(1, 64, 20_000).astype(np.float32),
                           rng.choice(d, 20_000) * rng.integers(-128, 128, 20_000).astype(np.float32)])


def test_q8_fold_gives_the_bits_of_the_sum_times_the_scale():
    # fma(bits, dw, -M·dw) against float(S) · dw: -M·dw must be exact (1.5 · 2^23 has two
    # significant bits) for every scale the kernel sees, and then the bits are the same.
    rng = np.random.default_rng(1)
    dw = np.concatenate([fp16_scales(), kquant_scales(rng)])
    nb = (-MAGIC_LO_F * dw).astype(np.float32)
    assert np.array_equal(np.float64(nb), -1.5 * 2.0**23 * np.float64(dw))
    s = np.concatenate([np.array([-(2**22) + 1, -32 * 128 * 255, -1, 0, 1, 32 * 128 * 255, 2**22 - 1]),
                        rng.integers(-(2**22) + 1, 2**22, dw.size - 7)])
    rng.shuffle(s)
    bits = (np.int32(MAGIC_LO) + s.astype(np.int32)).view(np.float32)
    folded = fma32(bits, dw, nb)
    joined = s.astype(np.float32) * dw  # the slice's float sum (exact), times dw
    assert np.array_equal(folded, joined)  # equal floats are equal bits, but for the sign of a zero
