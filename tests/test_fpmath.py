"""serq.fpmath: elementary functions with the same bits on every machine.

Checked against :mod:`decimal` at 60 digits (libmpdec: integer arithmetic,
correctly rounded): the tables, the accuracy of log, log1p, exp and pow
(within one ulp, and correctly rounded in all but a few cases per thousand),
the special values, the exact cases of pow, and that the bits do not change
when glibc is told to use its non-FMA code (the C library's own ``log`` does).
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import struct
import subprocess
import sys
from decimal import Decimal, getcontext

import pytest

from serq import fpmath

getcontext().prec = 60


def correctly_rounded(d: Decimal) -> float:
    return float(d)  # Decimal → float is correctly rounded


def ulps(a: float, b: float) -> float:
    """|a − b| in units of b's last place."""
    return 0.0 if a == b else abs(a - b) / math.ulp(b)


def test_the_tables_are_the_two_part_values_decimal_gives() -> None:
    ln2 = Decimal(2).ln()
    for k, i in enumerate(range(90, 183)):
        v = (Decimal(i) / 128).ln()
        hi, lo = fpmath._LOG_TABLE[2 * k], fpmath._LOG_TABLE[2 * k + 1]
        assert hi == float(v) and lo == float(v - Decimal(hi)), i
    for j in range(64):
        v = (Decimal(j) / 64 * ln2).exp()
        hi, lo = fpmath._EXP_TABLE[2 * j], fpmath._EXP_TABLE[2 * j + 1]
        assert hi == float(v) and lo == float(v - Decimal(hi)), j
    # the split constants: high parts with trailing zeros, high + low = the constant
    assert abs(Decimal(fpmath._LN2_HI) + Decimal(fpmath._LN2_LO) - ln2) < Decimal(2) ** -95
    assert fpmath._LN2_HI.hex().endswith("800p-1")  # 42 significant bits: e · LN2_HI exact
    assert abs(Decimal(fpmath._L_HI) + Decimal(fpmath._L_LO) - ln2 / 64) < Decimal(2) ** -98


def samples_log() -> list[float]:
    r = random.Random(7)
    xs = [1.0 - r.random() for _ in range(4000)]  # the arguments of ~exp draws
    xs += [math.exp(r.uniform(-700.0, 700.0)) for _ in range(3000)]
    xs += [1.0 + r.uniform(-1e-3, 1e-3) for _ in range(1000)]
    xs += [5e-324, 1e-310, 2.2250738585072014e-308, 1.7976931348623157e308, 1.0 - 2.0**-53, 1.0 + 2.0**-52]
    return xs


def test_log_is_within_one_ulp_and_almost_always_correctly_rounded() -> None:
    xs = samples_log()
    wrong = 0
    for x in xs:
        y = fpmath.log(x)
        exact = Decimal(x).ln()
        z = correctly_rounded(exact)
        assert ulps(y, z) <= 1.0, x
        if y != z:
            wrong += 1  # must then be within a hair of halfway: error below 0.51 ulp
            assert abs(Decimal(y) - exact) / Decimal(math.ulp(z)) < Decimal("0.51"), x
    assert wrong <= len(xs) // 500, wrong


def test_log1p_small_and_large_arguments() -> None:
    r = random.Random(11)
    xs = [r.uniform(-0.999, 3.0) for _ in range(3000)] + [r.uniform(-1e-6, 1e-6) for _ in range(1000)]
    xs += [1e-300, -1e-300, 1e300, 0.01, -0.5]
    wrong = 0
    for x in xs:
        exact = (Decimal(1) + Decimal(x)).ln() if abs(x) > 1e-200 else Decimal(x)
        z = correctly_rounded(exact)
        y = fpmath.log1p(x)
        assert ulps(y, z) <= 1.0, x
        wrong += y != z
    assert wrong <= len(xs) // 500, wrong
    # the histogram's bucket width: 1 % relative
    assert fpmath.log1p(0.01) == correctly_rounded((Decimal(1) + Decimal(0.01)).ln())


def test_exp_is_within_one_ulp_and_almost_always_correctly_rounded() -> None:
    r = random.Random(5)
    xs = [r.uniform(-745.0, 709.7) for _ in range(4000)] + [r.uniform(-1.0, 1.0) for _ in range(2000)]
    xs += [r.uniform(-1e-8, 1e-8) for _ in range(500)] + [0.0, -0.0, 1.0, -1.0, 709.78, -744.0, -708.5]
    wrong = 0
    for x in xs:
        z = correctly_rounded(Decimal(x).exp())
        y = fpmath.exp(x)
        assert ulps(y, z) <= 1.0, x
        wrong += y != z
    assert wrong <= len(xs) // 200, wrong


def test_pow_is_within_one_ulp_and_exact_where_the_result_is_a_float() -> None:
    r = random.Random(3)
    pairs = [(r.uniform(0.01, 100.0), r.uniform(-10.0, 10.0)) for _ in range(3000)]
    pairs += [(9.0, r.random()) for _ in range(1000)]  # the system-prompt program's 9 ^ U
    for a, b in pairs:
        z = correctly_rounded(Decimal(a) ** Decimal(b))
        assert ulps(fpmath.pow(a, b), z) <= 1.0, (a, b)
    exact = [(9.0, 0.5, 3.0), (8.0, 1.0 / 3.0, 2.0), (4.0, 1.5, 8.0), (2.0, 10.0, 1024.0), (10.0, -2.0, 0.01),
             (0.25, 0.5, 0.5), (2.0, -1074.0, 5e-324), (3.0, 3.0, 27.0), (-2.0, 3.0, -8.0), (-2.0, 2.0, 4.0),
             (1e10, 0.1, 10.000000000000002)]  # 0.1 is a hair above 1/10: 10 · (1 + 1.27e-16), 0.71 ulp up
    for a, b, want in exact:
        assert fpmath.pow(a, b) == want, (a, b)


def test_pow_special_cases_are_pythons() -> None:
    inf, nan = math.inf, math.nan
    values = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, inf, -inf, nan, 3.0, -3.0]
    for a in values:
        for b in values:
            try:
                want: object = a**b
            except ZeroDivisionError:
                want = "ZeroDivisionError"
            try:
                got: object = fpmath.pow(a, b)
            except ZeroDivisionError:
                got = "ZeroDivisionError"
            if isinstance(want, float) and isinstance(got, float):
                assert (math.isnan(want) and math.isnan(got)) or (got == want and
                        math.copysign(1.0, got) == math.copysign(1.0, want)), (a, b, got, want)
            elif isinstance(want, complex):
                assert isinstance(got, complex), (a, b)
            else:
                assert got == want, (a, b)
    assert fpmath.pow(10.0, 400.0) == inf and fpmath.pow(10.0, -400.0) == 0.0
    assert fpmath.pow(-10.0, 401.0) == -inf


def test_special_values() -> None:
    inf = math.inf
    assert fpmath.log(0.0) == -inf and fpmath.log(inf) == inf and math.isnan(fpmath.log(-1.0))
    assert math.isnan(fpmath.log(math.nan)) and fpmath.log(1.0) == 0.0
    assert fpmath.log1p(-1.0) == -inf and math.isnan(fpmath.log1p(-2.0)) and fpmath.log1p(inf) == inf
    assert fpmath.exp(1000.0) == inf and fpmath.exp(-1000.0) == 0.0 and fpmath.exp(-inf) == 0.0
    assert fpmath.exp(inf) == inf and math.isnan(fpmath.exp(math.nan)) and fpmath.exp(0.0) == 1.0
    assert fpmath.exp(709.78) < inf and fpmath.exp(709.79) == inf
    assert 0.0 < fpmath.exp(-745.0) <= 5e-324 * 2


def test_lgamma_against_the_c_library_to_1e_14() -> None:
    r = random.Random(2)
    for x in [r.uniform(0.01, 1000.0) for _ in range(2000)] + [0.5, 1.0, 2.0, 9.5, 15.0, 1e6]:
        want = math.lgamma(x)
        assert abs(fpmath.lgamma(x) - want) <= 1e-14 * max(1.0, abs(want)), x
    assert abs(fpmath.lgamma(1.0)) < 1e-14 and abs(fpmath.lgamma(2.0)) < 1e-14  # log(14!) less log(14!)
    assert fpmath.lgamma(0.0) == math.inf and math.isnan(fpmath.lgamma(-1.0))


DIGEST = """
import hashlib, random, struct, sys
sys.path.insert(0, {root!r})
from serq import fpmath
r = random.Random(1)
h = hashlib.sha256()
for _ in range(20000):
    u = r.random()
    h.update(struct.pack('<5d', fpmath.log(1.0 - u), fpmath.exp(60.0 * u - 30.0), fpmath.pow(9.0, u),
                         fpmath.log1p(u - 0.5), fpmath.lgamma(20.0 * u + 0.1)))
print(h.hexdigest())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="GLIBC_TUNABLES is glibc's")
def test_the_bits_do_not_depend_on_the_c_librarys_fma_variant() -> None:
    """glibc picks an FMA-compiled log/exp/pow on processors with FMA; its
    tunables can hide FMA, as an older processor would.  The C library's
    log changes bits then; serq.fpmath's must not."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = DIGEST.format(root=root)
    libm = code.replace("fpmath.log(1.0 - u)", "math.log(1.0 - u)").replace("import hashlib", "import math, hashlib")
    runs = {}
    for name, env in (("default", {}), ("no FMA", {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA"})):
        e = {**os.environ, **env}
        runs[name] = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                                    check=True).stdout
        runs[name + " libm"] = subprocess.run([sys.executable, "-c", libm], env=e, capture_output=True,
                                              text=True, check=True).stdout
    assert runs["default"] == runs["no FMA"]
    # in process: the same digest as the subprocesses
    r = random.Random(1)
    h = hashlib.sha256()
    for _ in range(20000):
        u = r.random()
        h.update(struct.pack("<5d", fpmath.log(1.0 - u), fpmath.exp(60.0 * u - 30.0), fpmath.pow(9.0, u),
                             fpmath.log1p(u - 0.5), fpmath.lgamma(20.0 * u + 0.1)))
    assert runs["default"].strip() == h.hexdigest()
    if runs["default libm"] == runs["no FMA libm"]:
        pytest.skip("this processor has no FMA (or glibc ignores the tunable): the contrast is not shown")
