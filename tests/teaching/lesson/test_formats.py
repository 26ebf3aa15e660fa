"""The lesson's number formats, one module per side: ``posenc.teaching.lesson.formats`` (the chapters' text, the
tour) and its twin ``static/formats.js`` (the page's scripts). Each is checked against what it promises
(the written number reads back as the value, rounded as said), and the two are run on one set of values
and held equal, character for character. The JavaScript runs in Node when it is installed, else in the
headless Chromium of the browser tests.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from decimal import ROUND_HALF_UP, Decimal
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc.teaching.lesson.formats import FIXED_LIMIT, MINUS, minus, sci, signed

SCRIPT = Path(str(resources.files("posenc.teaching.explorer").joinpath("static", "formats.js")))

#: values that have tripped number formats: ties (0.125, 2.5), a value that rounds to zero either side,
#: negative zero, tiny and huge sizes, exponents of one, two and three digits
VALUES = [
    0.0, -0.0, 0.84, -0.42, 0.125, -0.125, 2.5, -2.5, 0.375, 2.675, 9.995, 9.9951, -0.0049, 0.0049,
    1e-7, -2.38e-7, 1.25e-7, 123456.789, -6708.0, 1e20, -9.99e20, 1e100, 5e-324, 0.041, 1.6e-3, 0.055,
    -0.5604886, -0.690003519, 30.0, -30.0, 0.999, 1 / 3, -2 / 3, math.pi, 1e6, 1e-3,
]  # fmt: skip
DIGITS = [0, 1, 2, 3, 5]


def python_side() -> dict:
    out = {"minus": [minus(t) for t in ("-0.5", "0.5", "1e-05", "-1e-05", "-", "")]}
    for d in DIGITS:
        out[f"sci.{d}"] = [sci(v, d) for v in VALUES]
        out[f"signed.{d}"] = [signed(v, d) if abs(v) < FIXED_LIMIT else None for v in VALUES]
    return out


#: the same calls in JavaScript, on the module given as the first argument; prints the results as JSON
JS_SIDE = """
const [values, digits] = ARGS;
const out = { minus: ["-0.5", "0.5", "1e-05", "-1e-05", "-", ""].map((t) => f.minus(t)) };
for (const d of digits) {
  out[`sci.${d}`] = values.map((v) => f.sci(v, d));
  out[`signed.${d}`] = values.map((v) => (Math.abs(v) < f.FIXED_LIMIT ? f.signed(v, d) : null));
}
return out;
"""


def javascript_side(values=VALUES, digits=DIGITS) -> dict:
    # JSON has no negative zero: the values go as their repr and are read back with Number()
    args = json.dumps([[repr(v) for v in values], digits])
    body = JS_SIDE.replace(
        "const [values, digits] = ARGS;", f"const [raw, digits] = {args}; const values = raw.map(Number);"
    )
    node = shutil.which("node")
    if node:
        program = (
            f"import * as f from {json.dumps(SCRIPT.as_uri())};\nconsole.log(JSON.stringify((() => {{{body}}})()));"
        )
        done = subprocess.run(
            [node, "--input-type=module", "-e", program], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)
    from browser_support import chromium_or_skip, explore_server, headless_chromium

    path = chromium_or_skip()
    with explore_server() as url, headless_chromium(path) as browser:
        page = browser.new_page()
        page.goto(url)
        return page.evaluate(f"async () => {{ const f = await import('/static/formats.js'); {body} }}")


def test_the_page_and_the_lesson_write_every_number_alike():
    assert javascript_side() == python_side()


def test_negative_zero_is_carried_to_the_script_as_negative_zero():
    """The comparison above would miss a difference at -0.0 if the value arrived as +0."""
    got = javascript_side(values=[-0.0, -1e-9], digits=[2])
    assert got["sci.2"] == ["0.00e+00", f"{MINUS}1.00e-09"] and got["signed.2"] == ["0.00", "0.00"]


def test_signed_examples():
    assert [signed(0.84), signed(-0.42), signed(0.0), signed(-0.0), signed(-0.004)] == [
        "+0.84",
        f"{MINUS}0.42",
        "0.00",
        "0.00",
        "0.00",
    ]
    assert signed(0.125) == "+0.13" and signed(-2.5, 0) == f"{MINUS}3"  # a tie goes away from zero
    assert signed(30.0, 0) == "+30" and signed(-30.0, 0) == f"{MINUS}30"


def test_sci_examples():
    assert sci(2.38e-7) == "2.38e-07" and sci(-1500.0) == f"{MINUS}1.50e+03"
    assert sci(0.0) == "0.00e+00" and sci(-0.0) == "0.00e+00" and sci(1e100, 1) == "1.0e+100"
    assert sci(0.125, 1) == "1.3e-01" and sci(-2.5, 0) == f"{MINUS}3e+00"  # a tie goes away from zero


def test_minus_makes_only_the_leading_sign_a_minus():
    assert minus("-0.5") == f"{MINUS}0.5" and minus("1e-05") == "1e-05" and minus("-1e-05") == f"{MINUS}1e-05"
    assert minus("0.5") == "0.5" and MINUS == "\u2212"


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@given(finite.filter(lambda v: abs(v) < 1e15), st.integers(0, 8))
def test_signed_is_the_value_rounded_half_away_from_zero_with_its_sign(value, digits):
    text = signed(value, digits)
    exact = Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    assert Decimal(text.replace(MINUS, "-").lstrip("+")) == exact
    assert len(text.split(".")[1]) == digits if digits else "." not in text
    if exact == 0:
        assert text[0].isdigit()
    else:
        assert text[0] == ("+" if value > 0 else MINUS)


@given(finite, st.integers(0, 8))
def test_sci_reads_back_within_half_a_unit_of_its_last_digit(value, digits):
    text = sci(value, digits)
    mantissa, exponent = text.replace(MINUS, "-").split("e")
    assert len(exponent) >= 3 and exponent[0] in "+-"
    if value != 0:
        assert 1 <= abs(Decimal(mantissa)) < 10
        unit = Decimal(1).scaleb(int(exponent) - digits)
        assert abs(Decimal(mantissa).scaleb(int(exponent)) - Decimal(value)) <= unit / 2
        assert text.startswith(MINUS) == (value < 0)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: signed(float("nan")), ValueError, "value must be finite, got nan"),
        (lambda: signed(1e21), ValueError, r"less than 1e\+21 in size.*use sci"),
        (lambda: sci(float("inf")), ValueError, "value must be finite, got inf"),
        (lambda: signed("0.5"), TypeError, "value must be a real number, got '0.5'"),
        (lambda: sci(True), TypeError, "value must be a real number, got True"),
        (lambda: signed(0.5, -1), ValueError, "digits must be an integer from 0 to 20, got -1"),
        (lambda: sci(0.5, 2.0), ValueError, "digits must be an integer from 0 to 20, got 2.0"),
        (lambda: minus(-0.5), TypeError, "text must be a string, got -0.5"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_the_script_refuses_what_the_module_refuses():
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed; the script's refusals are checked where it is")
    program = f"""import * as f from {json.dumps(SCRIPT.as_uri())};
const out = [];
for (const call of [() => f.signed(NaN), () => f.signed(1e21), () => f.sci(Infinity), () => f.signed("0.5"),
                    () => f.signed(0.5, -1), () => f.sci(0.5, 2.5)]) {{
  try {{ out.push("no error: " + call()); }} catch (e) {{ out.push(`${{e.name}}: ${{e.message}}`); }}
}}
console.log(JSON.stringify(out));"""
    done = subprocess.run([node, "--input-type=module", "-e", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got[0] == "RangeError: value must be finite, got NaN"
    assert got[1].startswith("RangeError: value must be less than 1e+21 in size") and got[1].endswith("use sci")
    assert got[2] == "RangeError: value must be finite, got Infinity"
    assert got[3] == 'TypeError: value must be a number, got "0.5"'
    assert got[4] == "RangeError: digits must be an integer from 0 to 20, got -1"
    assert got[5] == "RangeError: digits must be an integer from 0 to 20, got 2.5"


def _sources(package: str, suffix: str) -> dict[str, str]:
    root = Path(str(resources.files(package)))
    return {str(path.relative_to(root)): path.read_text() for path in sorted(root.rglob(f"*{suffix}"))}


#: per side: the package and suffix of its sources, its format module, and what only that module may write
FORMAT_WRITERS = (
    (
        ("posenc", ".py"),
        "teaching/lesson/formats.py",
        (r"def (signed|sci|minus)\(", r"""replace\(\s*["']-["']\s*,\s*["'](\u2212|\\u2212)["']"""),
    ),
    (
        ("posenc.teaching.explorer", ".js"),
        "static/formats.js",
        (
            r"function (signed|sci|minus)\b|const (signed|sci|minus)\s*=",
            r"""replace\(\s*["'`]-["'`]\s*,|["'`]\u2212["'`]\s*\+\s*\w""",
        ),
    ),
)


@pytest.mark.parametrize("where, module, patterns", FORMAT_WRITERS, ids=["python", "javascript"])
def test_the_formats_are_written_once_on_each_side(where, module, patterns):
    """No module but the side's format module writes its own signed number, exponent form or minus sign
    (four ``signed()``, five ``sci()`` and six minus-sign formatters once stood in chapters, the tour and
    the page's scripts)."""
    sources = _sources(*where)
    assert module in sources and len(sources) > 20
    for name, text in sources.items():
        if name != module:
            for pattern in patterns:
                assert not re.search(pattern, text), (name, pattern)


def test_sci_or_rounding_names_the_level_under_it_and_the_digits_above():
    from posenc.teaching.lesson.formats import sci, sci_or_rounding

    assert sci_or_rounding(2.38e-07, 1e-5) == "rounding (below 1e-05)"
    assert sci_or_rounding(-5.07e-07, 1e-5) == "rounding (below 1e-05)"
    assert sci_or_rounding(0.0, 1e-5) == "rounding (below 1e-05)"
    assert sci_or_rounding(1e-5, 1e-5) == sci(1e-5)
    assert sci_or_rounding(-3.2e-3, 1e-5) == sci(-3.2e-3)
    for bad, error in ((0.0, ValueError), (-1e-5, ValueError), (float("nan"), ValueError), ("1e-5", TypeError)):
        with pytest.raises(error, match="rounding"):
            sci_or_rounding(1.0, bad)
    with pytest.raises(TypeError, match="value"):
        sci_or_rounding("1", 1e-5)
