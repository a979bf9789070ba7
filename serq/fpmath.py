"""Elementary functions that give the same bits on every machine.

``math.log``, ``math.exp`` and ``x ** y`` call the C library, and the C
library chooses its code by processor: glibc on x86-64 runs an FMA-compiled
variant of ``log``, ``exp`` and ``pow`` where the processor has FMA and the
plain one elsewhere, and the two differ in the last bit about once in 1 000
to 10 000 calls (``GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA`` shows it on
one machine).  One such bit in a draw moves every later figure of a run, so
everything that reaches a report goes through this module instead.

Each function here is written with IEEE 754 additions, subtractions,
multiplications and divisions of Python floats, ``math.frexp``/``ldexp`` and
``math.fsum`` — operations that are exactly rounded, hence the same on every
processor, compiler and interpreter.  The results are within a hair of the
correctly rounded value (log and exp: a measured error below 0.51 ulp; they
agree with the correctly rounded result in more than 99 % of cases), at
about 1 µs a call.

* :func:`log`, :func:`log1p`, :func:`exp`: table-driven (Tang's method):
  ``x = 2^e · c · (1 + u)`` with ``c`` on a grid of 1/128 and ``log(c)``
  tabulated in two parts; ``exp`` splits ``x = (64 k + j) · ln2/64 + r``.
* :func:`pow`: ``exp(b · log a)`` with the logarithm and the product carried
  in two parts, so exact cases (``9 ^ 0.5``) come out exact; the special
  cases (zeros, infinities, NaN, negative bases) are Python's.
* :func:`lgamma`: Stirling's series after shifting the argument above 15.

The tables below are ``log(i / 128)`` for i = 90 … 182 and ``2^(j / 64)`` for
j = 0 … 63, each as the double nearest the value and the double nearest the
rest (``tests/test_fpmath.py`` recomputes them with :mod:`decimal`).
"""

from __future__ import annotations

from math import floor, frexp, fsum, inf, isfinite, ldexp, nan, sqrt

__all__ = ["log", "log1p", "exp", "pow", "lgamma"]

# ln 2 in two parts; LN2_HI has 42 significant bits, so e * LN2_HI is exact for |e| < 2^11
_LN2_HI = float.fromhex("0x1.62e42fefa3800p-1")
_LN2_LO = float.fromhex("0x1.ef35793c76730p-45")
# ln 2 / 64 in two parts (36 significant bits: k * _L_HI exact for |k| < 2^17), and 64 / ln 2
_L_HI = float.fromhex("0x1.62e42fefa0000p-7")
_L_LO = float.fromhex("0x1.cf79abc9e3b3ap-46")
_INV_L = float.fromhex("0x1.71547652b82fep+6")
_SQRT_HALF = 0.7071067811865476
_SPLIT = 134217729.0  # 2^27 + 1: Veltkamp's splitting constant
# exp overflows above log(DBL_MAX) and is 0 below log of half the least subnormal
_EXP_MAX = 709.782712893384
_EXP_MIN = -745.1332191019412

_LOG_TABLE = (
    -0.3522205935893521, -5.7233316949182485e-18, -0.34117075740276714, 1.9366790062602867e-17,
    -0.33024168687057687, 1.0828321637483858e-17, -0.3194307707663612, -1.354256857264811e-18,
    -0.3087354816496133, 1.6199186085148102e-17, -0.29815337231907635, 1.720695867445866e-17,
    -0.2876820724517809, -2.607160616442564e-17, -0.27731928541623435, 7.44528405583513e-18,
    -0.26706278524904525, 7.32891532732017e-18, -0.2569104137850272, -2.502843296152504e-17,
    -0.24686007793152578, -1.361743371748368e-17, -0.2369097470783577, -1.9682402978398164e-18,
    -0.22705745063534608, -9.551415762738488e-18, -0.2173012756899814, -1.6168452453763015e-18,
    -0.2076393647782445, -1.2053243216686129e-17, -0.1980699137620938, -3.742843482461439e-18,
    -0.18859116980755003, 7.432164219196925e-18, -0.179201429457711, 1.0785017454858423e-17,
    -0.16989903679539747, 4.868008764439071e-19, -0.16068238169047347, 3.650183553047837e-18,
    -0.15154989812720093, -5.1669593684615594e-18, -0.14250006260728304, 9.926388234225749e-18,
    -0.13353139262452263, 3.664457663660085e-18, -0.1246424452072766, 5.808912678940971e-18,
    -0.1158318155251217, -4.338484369808096e-18, -0.1070981355563671, 1.73705104015906e-18,
    -0.09844007281325252, 4.439009633675136e-18, -0.08985632912186105, 6.273760163689594e-19,
    -0.0813456394539524, -5.07707635593117e-18, -0.07290677080808779, 6.306860257532778e-18,
    -0.06453852113757118, 6.470486661692933e-18, -0.05623971832287608, 3.2835149805605613e-18,
    -0.048009219186360606, -1.4390903347292205e-18, -0.039845908547199674, 3.129547680315208e-18,
    -0.0317486983145803, -3.0382263084680858e-18, -0.023716526617316044, 1.5774243488668215e-18,
    -0.015748356968139168, -1.0021578630528974e-18, -0.007843177461025893, -2.764708154124904e-19,
    0.0, 0.0, 0.007782140442054949, -1.2819179123343845e-20,
    0.015504186535965254, -3.278321022892429e-19, 0.02316705928153438, -1.1769544932063305e-18,
    0.030771658666753687, 1.0431732029005968e-18, 0.0383188643021366, -2.357996157351286e-18,
    0.0458095360312942, 1.902959866474257e-18, 0.053244514518812285, -1.665575816973663e-18,
    0.06062462181643484, 2.6424025938726934e-18, 0.06795066190850775, -1.2802141240611733e-18,
    0.07522342123758753, -5.930604196293241e-18, 0.08244366921107459, 5.700437773813987e-18,
    0.08961215868968714, -5.4268129336647135e-18, 0.09672962645855111, -5.597397486289965e-19,
    0.10379679368164356, 5.47772415726659e-18, 0.11081436634029011, 1.183748342825649e-18,
    0.11778303565638346, -1.1971685747593677e-18, 0.12470347850095724, -4.6522609636496624e-18,
    0.13157635778871926, 1.1123000879729588e-17, 0.13840232285911913, 4.447777301357527e-18,
    0.1451820098444979, 8.242418783022475e-18, 0.15191604202584197, 6.4838631244022194e-18,
    0.15860503017663857, 1.1257003872182592e-17, 0.16524957289530717, -1.0094935622322628e-17,
    0.17185025692665923, -6.0224538210113705e-18, 0.1784076574728183, -1.2432553788701131e-17,
    0.184922338494012, 3.0236614153574064e-18, 0.19139485299962947, -1.2129496905792884e-17,
    0.19782574332991987, 1.2821194372980142e-17, 0.2042155414286909, 2.7338281018722773e-18,
    0.21056476910734964, -4.249405314729895e-18, 0.21687393830061436, 4.551026193234283e-18,
    0.22314355131420976, -9.091270597324799e-18, 0.22937410106484582, 9.927671823978025e-18,
    0.2355660713127669, -2.3943371495187355e-18, 0.24171993688714516, 8.900990022166643e-18,
    0.24783616390458127, -1.2432209578702523e-17, 0.25391520998096345, -8.048097394424201e-18,
    0.25995752443692605, 2.069806938978935e-17, 0.26596354849713794, 5.3393802761314314e-18,
    0.27193371548364176, 7.83319637697442e-19, 0.2778684510034563, -9.16018294909263e-19,
    0.2837681731306446, -2.032665581126656e-17, 0.28963329258304266, 2.0535953219858174e-17,
    0.2954642128938359, -2.16461086040599e-17, 0.3012613305781618, -9.048511144048564e-18,
    0.3070250352949119, -1.2319916200101964e-17, 0.3127557100038969, -1.451808353098951e-17,
    0.3184537311185346, 2.7114779367326236e-17, 0.324119468654212, -7.958214381893813e-18,
    0.329753286372468, 2.122020616196946e-18, 0.3353555419211378, 1.834564437059473e-17,
    0.3409265869705932, 1.7467136443544747e-17, 0.34646676734620857, 1.028583585496265e-17,
    0.3519764231571782, -1.2953893030191963e-17,
)
_EXP_TABLE = (
    1.0, 0.0, 1.0108892860517005, -1.5234778603368577e-17,
    1.0218971486541166, 5.109225028973444e-17, 1.0330248790212284, 7.600838874027088e-18,
    1.0442737824274138, 8.551889705537965e-17, 1.0556451783605572, 1.759325738772092e-18,
    1.0671404006768237, -7.899853966841582e-17, 1.0787607977571199, -6.656660436056593e-17,
    1.0905077326652577, -3.046782079812471e-17, 1.102382583307841, 5.2660368715706944e-17,
    1.1143867425958924, 1.0410278456845571e-16, 1.1265216186082418, 5.165856758795457e-17,
    1.1387886347566916, 8.912812676025408e-17, 1.1511892299529827, 3.250710218863827e-17,
    1.1637248587775775, 3.8292048369240935e-17, 1.1763969916502812, 5.554203254218079e-17,
    1.189207115002721, 3.982015231465646e-17, 1.202156731452703, 6.644981499252301e-17,
    1.215247359980469, -7.712630692681488e-17, 1.22848053610687, -1.89878163130253e-17,
    1.241857812073484, 4.658027591836937e-17, 1.255380757024691, -6.7113898212968784e-18,
    1.2690509571917332, 2.667932131342186e-18, 1.2828700160787783, 1.713594918243561e-17,
    1.2968395546510096, 2.5382502794888315e-17, 1.3109612115247644, -7.181536135519454e-17,
    1.3252366431597413, -2.8587312100388614e-17, 1.339667524053303, 8.927282594831732e-17,
    1.3542555469368927, 7.70094837980299e-17, 1.3690024229745905, 9.593797919118849e-17,
    1.383909881963832, -6.770511658794786e-17, 1.3989796725383112, -9.614213209051323e-17,
    1.4142135623730951, -9.667293313452913e-17, 1.42961333839197, -1.2031642489053655e-17,
    1.4451808069770467, -3.0237581349939873e-17, 1.460917794180647, -5.600377186075216e-17,
    1.4768261459394993, -3.483994556892796e-17, 1.4929077282912648, 1.4192920154284036e-17,
    1.5091644275934228, -1.016455327754295e-16, 1.5255981507445384, -1.1024941712342561e-16,
    1.5422108254079407, 7.949834809697621e-17, 1.559004400237837, 3.7812070533575275e-17,
    1.5759808451078865, -1.0136916471278304e-17, 1.593142151342267, -1.0094406542311964e-16,
    1.6104903319492543, 2.4707192569797888e-17, 1.6280274218573478, -6.712955084707084e-17,
    1.645755478153965, -1.0125679913674773e-16, 1.6636765803267364, 5.8909926967131e-17,
    1.681792830507429, 8.199010020581497e-17, 1.7001063537185235, -8.0237193703977e-18,
    1.718619298122478, -1.851380418263111e-17, 1.7373338352737062, 3.164389299292957e-17,
    1.7562521603732995, 2.960140695448873e-17, 1.7753764925265212, 6.429731796556572e-17,
    1.7947090750031072, 1.8227458427912087e-17, 1.8142521755003989, -9.969531538920349e-17,
    1.8340080864093424, 3.283107224245627e-17, 1.8539791250833855, 9.761887490727594e-17,
    1.8741676341103, -6.122763413004143e-17, 1.8945759815869656, 3.4034035352165297e-17,
    1.9152065613971474, -1.0619946056195963e-16, 1.9360617934922943, 1.0332385960676326e-16,
    1.9571441241754002, 8.960767791036668e-17, 1.978456026387951, 4.0388753109278167e-17,
)


# 1/3, 1/5, 1/6, 1/7, 1/9 (the other coefficients of log1p are exact)
_C3, _C5, _C6, _C7, _C9 = 1.0 / 3.0, 0.2, 1.0 / 6.0, 1.0 / 7.0, 1.0 / 9.0
# 1/6, 1/24, 1/120, 1/720, 1/5040 (exp)
_E3, _E4, _E5, _E6, _E7 = 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0, 1.0 / 5040.0


def _log_parts(x: float, lo: float = 0.0) -> tuple[float, float, float, float]:
    """Four floats whose exact sum is log(x + lo) to about 2^-68 (x positive
    and finite, |lo| far below x's ulp … a few ulps)."""
    m, e = frexp(x)  # x = m · 2^e, m in [0.5, 1)
    if m < _SQRT_HALF:
        m *= 2.0
        e -= 1
    lo = ldexp(lo, -e)  # the same scaling as m (exact)
    i = int(m * 128.0 + 0.5)  # m in [0.707, 1.415): i in 91 … 181
    c = i * 0.0078125
    d = m - c  # exact (Sterbenz)
    u = d / c  # |u| < 2^-7.4
    t = u * _SPLIT
    uh = t - (t - u)
    r = (((d - uh * c) - (u - uh) * c) + lo) / c  # d / c = u + r: the division's rest, exactly before / c
    # log(1 + u + r) = log1p(u) + r / (1 + u) + …
    p = u * u * (-0.5 + u * (_C3 + u * (-0.25 + u * (_C5 + u * (-_C6 + u * (_C7 + u * (-0.125 + u * _C9)))))))
    k = 2 * (i - 90)
    return e * _LN2_HI, _LOG_TABLE[k], u, p + r * (1.0 - u) + (_LOG_TABLE[k + 1] + e * _LN2_LO)


def log(x: float) -> float:
    """The natural logarithm: ``-inf`` at 0, NaN below 0 and for NaN."""
    if x > 0.0:
        if x == inf:
            return inf
        return fsum(_log_parts(x))
    return -inf if x == 0.0 else nan


def log1p(x: float) -> float:
    """log(1 + x), accurate for small ``x``."""
    if x > -1.0:
        if x == inf:
            return inf
        y = 1.0 + x
        rest = (x - (y - 1.0)) if abs(x) <= 1.0 else (1.0 - (y - x))  # 1 + x = y + rest, exactly
        return fsum(_log_parts(y, rest))
    return -inf if x == -1.0 else nan


def _exp2(hi: float, lo: float) -> float:
    """exp(hi + lo) for finite hi inside the float range of exp, |lo| ≪ |hi|'s ulp."""
    kk = floor(hi * _INV_L + 0.5)
    rh = hi - kk * _L_HI  # exact
    rl = lo - kk * _L_LO
    r = rh + rl
    bv = r - rh
    re = (rh - (r - bv)) + (rl - bv)  # r + re = rh + rl exactly (two-sum)
    # exp(r + re) - 1 = r + r²/2 + … + re (1 + r)
    q = r * r * (0.5 + r * (_E3 + r * (_E4 + r * (_E5 + r * (_E6 + r * _E7))))) + re * (1.0 + r)
    j = 2 * (kk & 63)
    th, tl = _EXP_TABLE[j], _EXP_TABLE[j + 1]
    s = fsum((th, th * r, th * q, tl * (1.0 + r + q)))
    try:
        return ldexp(s, kk >> 6)
    except OverflowError:
        return inf


def exp(x: float) -> float:
    """e to the ``x``: ``inf`` past the float range (never an exception), 0 below it."""
    if x != x:
        return x
    if x > _EXP_MAX:
        return inf
    if x < _EXP_MIN:
        return 0.0
    return _exp2(x, 0.0)


def pow(a: float, b: float) -> float:  # noqa: A001 (the module's own, by intent)
    """``a ** b`` as Python computes it for floats — its special cases
    (``0 ** -1`` raises ``ZeroDivisionError``, a negative base with a
    fractional exponent gives a complex number) are left to Python — with
    the finite, non-trivial cases computed here."""
    if b == 0.0 or a == 1.0 or a == 0.0 or not (isfinite(a) and isfinite(b)):
        return a**b  # exact special values, the same everywhere
    if b == 1.0:
        return a
    if b == 2.0:
        return a * a
    if b == -1.0:
        return 1.0 / a
    sign = 1.0
    if a < 0.0:
        if b != floor(b):
            return a**b  # a complex number, as Python gives it
        a = -a
        if b % 2.0 == 1.0:
            sign = -1.0
    if b == 0.5:
        return sign * sqrt(a)  # correctly rounded, as pow's exact result rounds
    # b · log a in two parts: log a = lh + ll, b · lh = yh + yl exactly (Veltkamp / Dekker)
    parts = _log_parts(a)
    lh = fsum(parts)
    ll = fsum((*parts, -lh))
    yh = b * lh
    t = b * _SPLIT
    bh = t - (t - b)
    bl = b - bh
    t = lh * _SPLIT
    hh = t - (t - lh)
    hl = lh - hh
    yl = (((bh * hh - yh) + bh * hl) + bl * hh) + bl * hl + b * ll
    if yh > _EXP_MAX + 1.0:
        return sign * inf
    if yh < _EXP_MIN - 1.0:
        return sign * 0.0
    return sign * _exp2(yh, yl)


_HALF_LOG_2PI = 0.9189385332046728  # log(2π) / 2


def lgamma(x: float) -> float:
    """log Γ(x) for x > 0 (``inf`` at 0 and at ``inf``, NaN below 0), to
    about 1e-15: Stirling's series at x + n ≥ 15, less log(x (x+1) … (x+n-1))."""
    if not x > 0.0:
        return inf if x == 0.0 else nan
    if x == inf:
        return inf
    prod = 1.0
    while x < 15.0:
        prod *= x
        x += 1.0
    z = 1.0 / x
    z2 = z * z
    series = z * (1.0 / 12.0 - z2 * (1.0 / 360.0 - z2 * (1.0 / 1260.0 - z2 * (1.0 / 1680.0 - z2 / 1188.0))))
    return (x - 0.5) * log(x) - x + _HALF_LOG_2PI + series - log(prod)
