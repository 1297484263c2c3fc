//! Sizes and rates as users type them, and as netchar prints them.
//!
//! Suffixes: `k`, `M`, `G`, `T` are powers of 10 (SI); `Ki`, `Mi`, `Gi`, `Ti` are powers of 2.
//! iperf2 reads `1M` as 2^20 and iperf3 as 10^6 (see reference/iperf.md §5), so netchar accepts
//! both explicitly and always prints the exact parsed value back.

use thiserror::Error;

/// Why a size or rate could not be parsed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum UnitError {
    /// Nothing was given.
    #[error("empty value")]
    Empty,
    /// The number part is not a number.
    #[error("'{0}' is not a number (expected e.g. 100M, 128Ki, 1.5G)")]
    NotANumber(String),
    /// The suffix is not one of k, M, G, T, Ki, Mi, Gi, Ti.
    #[error("unknown suffix '{suffix}' in '{input}' (use k, M, G, T for 10^3.. or Ki, Mi, Gi, Ti for 2^10..)")]
    BadSuffix {
        /// The whole input.
        input: String,
        /// The suffix found.
        suffix: String,
    },
    /// Negative, or too large for 64 bits, or a fraction of a unit.
    #[error("'{0}' is out of range")]
    OutOfRange(String),
}

fn multiplier(suffix: &str) -> Option<f64> {
    Some(match suffix {
        "" => 1.0,
        "k" | "K" => 1e3,
        "m" | "M" => 1e6,
        "g" | "G" => 1e9,
        "t" | "T" => 1e12,
        "Ki" | "ki" | "KiB" => 1024.0,
        "Mi" | "mi" | "MiB" => 1024.0 * 1024.0,
        "Gi" | "gi" | "GiB" => 1024.0 * 1024.0 * 1024.0,
        "Ti" | "ti" | "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    })
}

fn parse_scaled(input: &str, strip: &[&str]) -> Result<u64, UnitError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(UnitError::Empty);
    }
    let mut body = s;
    for tail in strip {
        if let Some(b) = body.strip_suffix(tail) {
            body = b;
            break;
        }
    }
    let split = body.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+')).unwrap_or(body.len());
    let (num, suffix) = body.split_at(split);
    if num.is_empty() {
        return Err(UnitError::NotANumber(input.to_string()));
    }
    let mult = multiplier(suffix)
        .ok_or_else(|| UnitError::BadSuffix { input: input.to_string(), suffix: suffix.to_string() })?;
    let value: f64 = num.parse().map_err(|_| UnitError::NotANumber(input.to_string()))?;
    let scaled = value * mult;
    if !scaled.is_finite() || scaled < 0.0 || scaled > u64::MAX as f64 {
        return Err(UnitError::OutOfRange(input.to_string()));
    }
    let rounded = scaled.round();
    if (scaled - rounded).abs() > 1e-6 * scaled.max(1.0) {
        return Err(UnitError::OutOfRange(input.to_string()));
    }
    Ok(rounded as u64)
}

/// Parses a byte count such as `131072`, `128Ki`, `1G`, `1.5M`. A trailing `B` is allowed.
pub fn parse_bytes(input: &str) -> Result<u64, UnitError> {
    parse_scaled(input, &["B"])
}

/// Parses a rate in bits per second such as `100M`, `1G`, `2.5Gi`. `bit/s` or `bps` may follow.
pub fn parse_bit_rate(input: &str) -> Result<u64, UnitError> {
    parse_scaled(input, &["bit/s", "bps", "b"])
}

/// How rates are printed: bits with SI prefixes by default, or a fixed unit like iperf's `-f`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RateFormat {
    /// bit/s with an SI prefix picked to fit (the default).
    #[default]
    AutoBits,
    /// kbit/s (10^3).
    Kbits,
    /// Mbit/s (10^6).
    Mbits,
    /// Gbit/s (10^9).
    Gbits,
    /// KBytes/s (2^10 bytes).
    KBytes,
    /// MBytes/s (2^20 bytes, as stackthru prints MB/s).
    MBytes,
    /// GBytes/s (2^30 bytes).
    GBytes,
}

impl RateFormat {
    /// Parses iperf's `-f` letter: `k m g` for bits, `K M G` for bytes.
    pub fn from_letter(letter: &str) -> Option<Self> {
        Some(match letter {
            "k" => Self::Kbits,
            "m" => Self::Mbits,
            "g" => Self::Gbits,
            "K" => Self::KBytes,
            "M" => Self::MBytes,
            "G" => Self::GBytes,
            "a" | "auto" => Self::AutoBits,
            _ => return None,
        })
    }

    /// Formats a rate given in bits per second.
    pub fn format(self, bits_per_second: f64) -> String {
        let bps = bits_per_second;
        match self {
            Self::AutoBits => format_si(bps, "bit/s"),
            Self::Kbits => format!("{:.2} kbit/s", bps / 1e3),
            Self::Mbits => format!("{:.2} Mbit/s", bps / 1e6),
            Self::Gbits => format!("{:.3} Gbit/s", bps / 1e9),
            Self::KBytes => format!("{:.2} KByte/s", bps / 8.0 / 1024.0),
            Self::MBytes => format!("{:.2} MByte/s", bps / 8.0 / 1048576.0),
            Self::GBytes => format!("{:.3} GByte/s", bps / 8.0 / 1073741824.0),
        }
    }
}

/// `value` with an SI prefix chosen so that 1 ≤ mantissa < 1000, three significant digits.
pub fn format_si(value: f64, unit: &str) -> String {
    let prefixes = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (scale, p) in prefixes {
        // 999.96 M rounds to "1000 M": print it as "1.00 G".
        if value >= scale * 0.9995 {
            return format!("{} {p}{unit}", three_digits(value / scale));
        }
    }
    format!("{} {unit}", three_digits(value))
}

/// A byte count with a binary prefix (KiB, MiB, GiB), as transfer columns show it.
pub fn format_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    let prefixes = [(1099511627776.0, "TiB"), (1073741824.0, "GiB"), (1048576.0, "MiB"), (1024.0, "KiB")];
    for (scale, p) in prefixes {
        if b >= scale {
            return format!("{} {p}", three_digits(b / scale));
        }
    }
    format!("{bytes} B")
}

fn three_digits(v: f64) -> String {
    // Decide by the rounded value: 99.996 prints as "100", not "100.0".
    if v >= 99.95 {
        format!("{v:.0}")
    } else if v >= 9.995 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_and_binary_suffixes_parse_exactly() {
        assert_eq!(parse_bytes("128Ki"), Ok(131_072));
        assert_eq!(parse_bytes("1M"), Ok(1_000_000));
        assert_eq!(parse_bytes("1Mi"), Ok(1_048_576));
        assert_eq!(parse_bytes("2G"), Ok(2_000_000_000));
        assert_eq!(parse_bytes("1.5k"), Ok(1500));
        assert_eq!(parse_bytes("100MB"), Ok(100_000_000));
        assert_eq!(parse_bit_rate("200M"), Ok(200_000_000));
        assert_eq!(parse_bit_rate("10Gbps"), Ok(10_000_000_000));
        assert_eq!(parse_bit_rate("0"), Ok(0));
    }

    #[test]
    fn bad_values_are_rejected_with_reason() {
        assert!(matches!(parse_bytes("1Q"), Err(UnitError::BadSuffix { .. })));
        assert!(matches!(parse_bytes("abc"), Err(UnitError::NotANumber(_))));
        assert!(matches!(parse_bytes("-1"), Err(UnitError::OutOfRange(_))));
        assert!(matches!(parse_bytes("0.5"), Err(UnitError::OutOfRange(_))));
        assert_eq!(parse_bytes(""), Err(UnitError::Empty));
    }

    #[test]
    fn rates_format_with_prefixes() {
        assert_eq!(format_si(191_300_000.0, "bit/s"), "191 Mbit/s");
        assert_eq!(format_si(20_570_000_000.0, "bit/s"), "20.6 Gbit/s");
        assert_eq!(RateFormat::MBytes.format(8.0 * 1048576.0), "1.00 MByte/s");
        assert_eq!(format_bytes(131072), "128 KiB");
        assert_eq!(format_si(99_996_000.0, "bit/s"), "100 Mbit/s");
        assert_eq!(format_si(9_999_000.0, "bit/s"), "10.0 Mbit/s");
        assert_eq!(format_si(999_960_000.0, "bit/s"), "1.00 Gbit/s");
    }
}
