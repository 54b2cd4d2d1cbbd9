//! Money and figures as people read them, the one formatter every page uses. The API keeps exact
//! decimal strings; pages show thousands separators and the precision an amount needs: two
//! decimals from one unit up, and at least two significant digits below one (0.0086 USD a job, not
//! 0.01 and not 0.00859146341463414634). Pure.

use rust_decimal::{Decimal, RoundingStrategy};

/// Hours in an average month (365 × 24 ÷ 12): what "a month" means in every monthly cost.
pub const HOURS_PER_MONTH: Decimal = Decimal::from_parts(730, 0, 0, false, 0);

/// The currencies in circulation, by their ISO 4217 alphabetic code (ISO 4217 list one, 2025):
/// the codes a price may be in. Funds, precious metals, the SDR and the testing codes (`XTS`,
/// `XXX`) are left out: no GPU is rented in them.
pub const ISO_4217: [&str; 157] = [
    "AED", "AFN", "ALL", "AMD", "ANG", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT", "BGN", "BHD", "BIF",
    "BMD", "BND", "BOB", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD", "CAD", "CDF", "CHF", "CLP", "CNY", "COP", "CRC",
    "CUP", "CVE", "CZK", "DJF", "DKK", "DOP", "DZD", "EGP", "ERN", "ETB", "EUR", "FJD", "FKP", "GBP", "GEL", "GHS",
    "GIP", "GMD", "GNF", "GTQ", "GYD", "HKD", "HNL", "HTG", "HUF", "IDR", "ILS", "INR", "IQD", "IRR", "ISK", "JMD",
    "JOD", "JPY", "KES", "KGS", "KHR", "KMF", "KPW", "KRW", "KWD", "KYD", "KZT", "LAK", "LBP", "LKR", "LRD", "LSL",
    "LYD", "MAD", "MDL", "MGA", "MKD", "MMK", "MNT", "MOP", "MRU", "MUR", "MVR", "MWK", "MXN", "MYR", "MZN", "NAD",
    "NGN", "NIO", "NOK", "NPR", "NZD", "OMR", "PAB", "PEN", "PGK", "PHP", "PKR", "PLN", "PYG", "QAR", "RON", "RSD",
    "RUB", "RWF", "SAR", "SBD", "SCR", "SDG", "SEK", "SGD", "SHP", "SLE", "SOS", "SRD", "SSP", "STN", "SVC", "SYP",
    "SZL", "THB", "TJS", "TMT", "TND", "TOP", "TRY", "TTD", "TWD", "TZS", "UAH", "UGX", "USD", "UYU", "UZS", "VED",
    "VES", "VND", "VUV", "WST", "XAF", "XCD", "XCG", "XOF", "XPF", "YER", "ZAR", "ZMW", "ZWG",
];

/// Whether `code` (upper case) is a currency in circulation ([`ISO_4217`]).
pub fn is_currency(code: &str) -> bool {
    ISO_4217.contains(&code)
}

/// A plain decimal as people write a price: digits, at most one `.` with digits on both sides.
/// No exponent (`1e3`), sign, separator (`1_000`, `1,000`) or currency sign.
pub fn is_plain_decimal(text: &str) -> bool {
    let (whole, frac) = text.split_once('.').unwrap_or((text, "0"));
    !whole.is_empty()
        && !frac.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
}

/// `15184` → "15,184.00"; `0.008591` → "0.0086"; `0.25` → "0.25"; `0` → "0.00".
pub fn amount(d: Decimal) -> String {
    let negative = d.is_sign_negative() && !d.is_zero();
    let a = d.abs();
    let mut places = if a.is_zero() || a >= Decimal::ONE {
        2
    } else {
        // Two significant digits: as many places as it takes past the leading zeros.
        let mut places = 2u32;
        while places < 12 && a < Decimal::new(1, places - 1) {
            places += 1;
        }
        places
    };
    let round = |places: u32| a.round_dp_with_strategy(places, RoundingStrategy::MidpointAwayFromZero);
    let mut rounded = round(places);
    // Rounding up can add a digit in front (0.00995 → 0.0100): two significant digits are then one
    // place fewer (0.010).
    if places > 2 && rounded >= Decimal::new(1, places - 2) {
        places -= 1;
        rounded = round(places);
    }
    let mut text = format!("{rounded:.prec$}", prec = places as usize);
    // Past two places, zeros that say nothing go: 0.02 reads "0.02", not "0.020"; a rounded
    // figure keeps its two significant digits (0.00995 reads "0.010", not "0.01").
    while places > 2 && text.ends_with('0') && rounded == a {
        text.pop();
        places -= 1;
    }
    format!("{}{}", if negative { "-" } else { "" }, grouped(&text))
}

/// `1234567.5` → `1,234,567.5`: the whole part in groups of three.
fn grouped(text: &str) -> String {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let mut out = String::with_capacity(whole.len() + whole.len() / 3 + frac.len() + 1);
    for (i, ch) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out.push('.');
    out.push_str(frac);
    out
}

/// An amount with its currency: "15,184.00 USD".
pub fn with_currency(d: Decimal, currency: &str) -> String {
    format!("{} {currency}", amount(d))
}

/// Two amounts set against each other (a cost and its ceiling), each with its currency, with as
/// many places as it takes to tell them apart when they differ: 2.500125 against a ceiling of 2.50
/// reads "2.5001 USD" and "2.5000 USD", never "2.50 USD, more than the ceiling of 2.50 USD".
pub fn compared_with_currency(value: Decimal, against: Decimal, currency: &str) -> (String, String) {
    let (v, a) = (with_currency(value, currency), with_currency(against, currency));
    if v != a || value == against {
        return (v, a);
    }
    let places = (3..=12)
        .find(|p| value.round_dp(*p) != against.round_dp(*p))
        .unwrap_or(12);
    let exact = |d: Decimal| {
        let text = format!("{:.prec$}", d.abs().round_dp(places), prec = places as usize);
        let sign = if d.is_sign_negative() && !d.is_zero() { "-" } else { "" };
        format!("{sign}{} {currency}", grouped(&text))
    };
    (exact(value), exact(against))
}

/// A sum in a sentence or a headline: as [`amount`], without the ".00" of a whole amount
/// (15184.000000 → "15,184"; 14541.6 → "14,541.60"; 0.0086 stays "0.0086").
pub fn sum(d: Decimal) -> String {
    let text = amount(d);
    match text.strip_suffix(".00") {
        Some(whole) if !whole.is_empty() && whole != "-0" => whole.to_owned(),
        _ => text,
    }
}

/// A sum with its currency: "15,184 USD".
pub fn sum_with_currency(d: Decimal, currency: &str) -> String {
    format!("{} {currency}", sum(d))
}

/// A price per unit (a rate per GPU-hour) as the sheet gave it, never rounded: a manager checks
/// "8 × 2.4875 × 730 h" by hand from it. At least two places, then as many as it has (up to
/// six, the price table's): `3.5` → "3.50", `2.4875` → "2.4875", `0.651463` → "0.651463".
pub fn rate(d: Decimal) -> String {
    let exact = d.round_dp(6).normalize();
    let places = exact.scale().max(2);
    let whole = amount(exact.trunc());
    let (whole, _) = whole.split_once('.').unwrap_or((&whole, ""));
    let frac = format!("{:.prec$}", exact.fract().abs(), prec = places as usize);
    format!("{whole}{}", frac.trim_start_matches('0'))
}

/// A rate with its currency: "2.4875 USD".
pub fn rate_with_currency(d: Decimal, currency: &str) -> String {
    format!("{} {currency}", rate(d))
}

/// The sign people read for a card operator (`ge` → "≥"); a sign passes through.
pub fn op_symbol(op: &str) -> &str {
    match op {
        "lt" => "<",
        "le" => "≤",
        "gt" => ">",
        "ge" => "≥",
        "eq" => "=",
        "ne" => "≠",
        other => other,
    }
}

/// A measured or threshold value with its unit, the same on every page: numbers through
/// [`figure`], a `fraction` as a percentage (0.95 → "95 %"), `count` without a unit word,
/// booleans as yes/no, lists joined. `unit` is a card unit ("ms", "GB/s", "fraction", "count", "").
pub fn measured(value: &serde_json::Value, unit: &str) -> String {
    use serde_json::Value;
    match value {
        Value::Bool(true) => "yes".into(),
        Value::Bool(false) => "no".into(),
        Value::Number(n) => match n.as_f64() {
            Some(x) if unit == "fraction" => percent(x),
            Some(x) if unit.is_empty() || unit == "count" => figure(x),
            Some(x) if unit == "%" => format!("{} %", figure(x)),
            Some(x) => format!("{} {unit}", figure(x)),
            None => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(|v| measured(v, "")).collect::<Vec<_>>().join(", "),
        Value::Null => "—".into(),
        other => other.to_string(),
    }
}

/// A threshold as every page shows it: "≥ 8", "≤ 500 ms", "≥ 95 %", "= yes".
pub fn threshold(op: &str, value: &serde_json::Value, unit: &str) -> String {
    format!("{} {}", op_symbol(op), measured(value, unit))
}

/// A decimal as a form field holds it: no separators, at least two decimal places, every
/// significant digit kept (3.5 → "3.50", 2.9875 → "2.9875").
pub fn plain(d: Decimal) -> String {
    let d = d.normalize();
    if d.scale() < 2 {
        format!("{d:.2}")
    } else {
        d.to_string()
    }
}

/// A byte bound as people read it: `16 MiB`, `512 KiB`, else `300 bytes`.
pub fn bytes(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// A count with thousands separators: 1200000 → "1,200,000".
pub fn count(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// A measured figure (requests/s, tokens/s) as people read it: thousands grouped, one decimal below
/// 100, two significant digits below 1, no trailing ".0": 1250.4 → "1,250"; 12.0 → "12";
/// 12.46 → "12.5"; 0.834 → "0.83".
pub fn figure(x: f64) -> String {
    if !x.is_finite() {
        return "—".into();
    }
    let a = x.abs();
    if a >= 100.0 {
        return count(x.round() as i64);
    }
    let text = if a >= 1.0 || a == 0.0 {
        format!("{x:.1}")
    } else {
        let places = (-a.log10().floor()) as usize + 1;
        format!("{x:.places$}")
    };
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// The billing words every form and sheet accepts (price sheets, trials, the approval form), in
/// the glossary's spelling.
pub const BILLINGS: [&str; 4] = ["on-demand", "spot", "reserved", "serverless"];

/// A billing word as people type it, in its one spelling: any case, and "on demand", "ondemand" or
/// "on_demand" for on-demand. `None` for anything else.
pub fn billing(word: &str) -> Option<&'static str> {
    let w = word.trim().to_ascii_lowercase().replace([' ', '_'], "-");
    let w = if w == "ondemand" { "on-demand".to_owned() } else { w };
    BILLINGS.iter().copied().find(|b| *b == w)
}

/// Any stored value as every page shows it (a measured metric, a criterion's value, a parsed
/// field): numbers through [`number`], booleans as yes/no, nothing as "—", lists comma-separated.
/// One formatter, so no page shows `true`, `null` or `6210.4` where another shows "6,210.4".
pub fn value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "—".into(),
        serde_json::Value::Bool(true) => "yes".into(),
        serde_json::Value::Bool(false) => "no".into(),
        serde_json::Value::Number(n) => n.as_f64().map(number).unwrap_or_else(|| n.to_string()),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) => items.iter().map(value).collect::<Vec<_>>().join(", "),
        serde_json::Value::Object(_) => v.to_string(),
    }
}

/// A measured number with the precision a comparison against a threshold needs: whole numbers
/// grouped (8, 1,024); from 1,000 one decimal (6,210.4); from 1 two (99.95); below 1 three
/// significant digits (0.00859); trailing zeros dropped. Never `NaN` or `inf`: "—".
pub fn number(x: f64) -> String {
    if !x.is_finite() {
        return "—".into();
    }
    let a = x.abs();
    let places = if x.fract() == 0.0 {
        0
    } else if a >= 1000.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        ((-a.log10().floor()) as usize + 2).min(12)
    };
    let text = format!("{a:.places$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text.as_str()
    };
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let grouped = whole.parse::<i64>().map(count).unwrap_or_else(|_| whole.to_owned());
    let sign = if x < 0.0 && text != "0" { "-" } else { "" };
    if fraction.is_empty() {
        format!("{sign}{grouped}")
    } else {
        format!("{sign}{grouped}.{fraction}")
    }
}

/// A share (0–1) as a percentage with one decimal: 0.992 → "99.2 %"; 1.0 → "100 %".
pub fn percent(share: f64) -> String {
    format!("{} %", figure((share * 1000.0).round() / 10.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_set_against_each_other_show_the_places_that_tell_them_apart() {
        assert_eq!(
            compared_with_currency(d("2.500125"), d("2.50"), "USD"),
            ("2.5001 USD".to_owned(), "2.5000 USD".to_owned())
        );
        assert_eq!(
            compared_with_currency(d("0.0250001"), d("0.025"), "EUR"),
            ("0.0250001 EUR".to_owned(), "0.0250000 EUR".to_owned())
        );
        // Apart already, or equal: as each reads alone.
        assert_eq!(
            compared_with_currency(d("2.71"), d("2.50"), "USD"),
            ("2.71 USD".to_owned(), "2.50 USD".to_owned())
        );
        assert_eq!(
            compared_with_currency(d("2.50"), d("2.5"), "USD"),
            ("2.50 USD".to_owned(), "2.50 USD".to_owned())
        );
        assert_eq!(
            compared_with_currency(d("1234.5001"), d("1234.50"), "USD").0,
            "1,234.5001 USD"
        );
    }

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn billing_words_have_one_spelling() {
        assert_eq!(billing("On-Demand"), Some("on-demand"));
        assert_eq!(billing(" on demand "), Some("on-demand"));
        assert_eq!(billing("ondemand"), Some("on-demand"));
        assert_eq!(billing("SPOT"), Some("spot"));
        assert_eq!(billing("monthly"), None);
    }

    #[test]
    fn values_read_the_same_on_every_page() {
        use serde_json::json;
        assert_eq!(value(&json!(6210.4)), "6,210.4");
        assert_eq!(value(&json!(8.0)), "8");
        assert_eq!(value(&json!(1024)), "1,024");
        assert_eq!(value(&json!(99.95)), "99.95");
        assert_eq!(value(&json!(0.00859)), "0.00859");
        assert_eq!(value(&json!(0.01288488888888889)), "0.0129");
        assert_eq!(value(&json!(100.96638655462183)), "100.97");
        assert_eq!(value(&json!(2416.6666666666665)), "2,416.7");
        assert_eq!(value(&json!(-1234.5)), "-1,234.5");
        assert_eq!(value(&json!(true)), "yes");
        assert_eq!(value(&json!(null)), "—");
        assert_eq!(value(&json!(["a", 2])), "a, 2");
        assert_eq!(number(f64::NAN), "—");
    }

    #[test]
    fn amounts_read_as_people_write_them() {
        assert_eq!(amount(d("15184.000000")), "15,184.00");
        assert_eq!(amount(d("1234567.891")), "1,234,567.89");
        assert_eq!(amount(d("999.995")), "1,000.00");
        assert_eq!(amount(d("3.5")), "3.50");
        assert_eq!(amount(d("0")), "0.00");
        assert_eq!(amount(d("-42.1")), "-42.10");
    }

    #[test]
    fn small_amounts_keep_two_significant_digits() {
        assert_eq!(amount(d("0.00859146341463414634")), "0.0086");
        assert_eq!(amount(d("0.0490068292682926829268292683")), "0.049");
        assert_eq!(amount(d("0.25")), "0.25");
        assert_eq!(amount(d("0.5")), "0.50");
        assert_eq!(amount(d("0.000012")), "0.000012");
        assert_eq!(with_currency(d("0.01288"), "USD"), "0.013 USD");
        assert_eq!(amount(d("0.02")), "0.02");
        assert_eq!(amount(d("0.0100")), "0.01");
        assert_eq!(amount(d("0.0996")), "0.10");
        // Rounded up to a round figure, it still shows two significant digits (it read "0.01").
        assert_eq!(amount(d("0.00995")), "0.010");
        assert_eq!(amount(d("0.000996")), "0.0010");
    }

    #[test]
    fn rates_keep_every_place_they_were_given() {
        assert_eq!(rate(d("3.5")), "3.50");
        assert_eq!(rate(d("2.4875")), "2.4875");
        assert_eq!(rate(d("4.096575")), "4.096575");
        assert_eq!(rate(d("1234.5")), "1,234.50");
        assert_eq!(rate(d("98.320000")), "98.32");
        assert_eq!(rate(d("0.651463")), "0.651463");
        assert_eq!(rate(d("0.4")), "0.40");
        assert_eq!(rate_with_currency(d("2.4875"), "USD"), "2.4875 USD");
    }

    #[test]
    fn sums_drop_the_cents_of_whole_amounts() {
        assert_eq!(sum(d("15184.000000")), "15,184");
        assert_eq!(sum_with_currency(d("15184.000000"), "USD"), "15,184 USD");
        assert_eq!(sum(d("14541.6")), "14,541.60");
        assert_eq!(sum(d("245280")), "245,280");
        assert_eq!(sum(d("0.00859")), "0.0086");
        assert_eq!(sum(d("0")), "0");
        assert_eq!(sum(d("-1200")), "-1,200");
    }

    #[test]
    fn thresholds_read_the_same_everywhere() {
        use serde_json::json;
        assert_eq!(threshold("ge", &json!(8.0), "count"), "≥ 8");
        assert_eq!(threshold("ge", &json!(8), ""), "≥ 8");
        assert_eq!(threshold("le", &json!(500), "ms"), "≤ 500 ms");
        assert_eq!(threshold("ge", &json!(0.95), "fraction"), "≥ 95 %");
        assert_eq!(threshold("le", &json!(0.01), "fraction"), "≤ 1 %");
        assert_eq!(threshold("eq", &json!(true), ""), "= yes");
        assert_eq!(threshold("ge", &json!(476), "GB/s"), "≥ 476 GB/s");
        assert_eq!(threshold("lt", &json!(90), "%"), "< 90 %");
        assert_eq!(measured(&json!(0.0049006829268), ""), "0.0049");
        assert_eq!(measured(&json!(["A", "B"]), ""), "A, B");
    }

    #[test]
    fn form_values_keep_every_digit() {
        assert_eq!(plain(d("3.5")), "3.50");
        assert_eq!(plain(d("2.98750")), "2.9875");
        assert_eq!(plain(d("12")), "12.00");
    }

    #[test]
    fn counts_group_thousands() {
        assert_eq!(count(1_200_000), "1,200,000");
        assert_eq!(count(999), "999");
        assert_eq!(count(-1000), "-1,000");
    }

    #[test]
    fn measured_figures_and_shares_read_plainly() {
        assert_eq!(figure(1250.4), "1,250");
        assert_eq!(figure(12.0), "12");
        assert_eq!(figure(12.46), "12.5");
        assert_eq!(figure(0.834), "0.83");
        assert_eq!(figure(0.0), "0");
        assert_eq!(percent(0.992), "99.2 %");
        assert_eq!(percent(1.0), "100 %");
        assert_eq!(percent(0.71), "71 %");
    }
}
