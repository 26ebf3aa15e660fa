// The lesson's number formats, written once for the page's scripts: the twin of posenc.teaching.lesson.formats
// (the chapters' text and the tour), with the same functions under the same names; a test runs both on
// one set of values and holds them equal. Both round a tie (0.125 to two decimals) away from zero.
//   minus(text)        a number's leading "-" as the minus sign "−" (an exponent's sign stays "-")
//   signed(v, digits)  fixed decimals with an explicit sign: "+0.84", "−0.42", "0.00" when it rounds to zero
//   sci(v, digits)     exponent form, exponent of two digits or more: "2.38e-07", "−1.50e+03"

export const MINUS = "\u2212";
// the largest size signed() writes in fixed decimals (toFixed turns to exponent form there)
export const FIXED_LIMIT = 1e21;

function check(value, digits) {
  if (typeof value !== "number") throw new TypeError(`value must be a number, got ${JSON.stringify(value)}`);
  if (!Number.isInteger(digits) || digits < 0 || digits > 20) {
    throw new RangeError(`digits must be an integer from 0 to 20, got ${JSON.stringify(digits)}`);
  }
  if (!Number.isFinite(value)) throw new RangeError(`value must be finite, got ${value}`);
}

export function minus(text) {
  return text.startsWith("-") ? MINUS + text.slice(1) : text;
}

export function signed(value, digits = 2) {
  check(value, digits);
  if (Math.abs(value) >= FIXED_LIMIT) {
    throw new RangeError(`value must be less than 1e+21 in size for fixed decimals, got ${value}; use sci`);
  }
  const text = Math.abs(value).toFixed(digits);
  if (Number(text) === 0) return text;
  return (value > 0 ? "+" : MINUS) + text;
}

export function sci(value, digits = 2) {
  check(value, digits);
  let mantissa = (0).toFixed(digits), power = 0;
  if (value !== 0) {
    const [m, e] = Math.abs(value).toExponential(digits).split("e");
    mantissa = m;
    power = Number(e);
  }
  const text = `${mantissa}e${power < 0 ? "-" : "+"}${String(Math.abs(power)).padStart(2, "0")}`;
  return value < 0 ? MINUS + text : text;
}
