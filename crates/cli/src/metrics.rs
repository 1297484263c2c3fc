//! `--expect 'PATH OP VALUE'`: the gate's parsing and its test. The figure at PATH is the
//! result's own (netchar_model::figures): `up.receiver.bits_per_second` or `rr.latency_us.p99`,
//! under `summary`, then from the result's root.

/// A comparison operator of an expectation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Op {
    Ge,
    Gt,
    Le,
    Lt,
    Eq,
}

/// One `--expect 'PATH OP VALUE'`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expectation {
    pub(crate) path: String,
    pub(crate) op: Op,
    pub(crate) value: f64,
    pub(crate) text: String,
}

impl Expectation {
    /// Parses `up.receiver.bits_per_second >= 400M`; the value takes SI/binary suffixes.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let ops = [(">=", Op::Ge), ("<=", Op::Le), ("==", Op::Eq), (">", Op::Gt), ("<", Op::Lt)];
        for (sym, op) in ops {
            if let Some((path, value)) = text.split_once(sym) {
                let path = path.trim().to_string();
                if path.is_empty() || path.contains(char::is_whitespace) {
                    return Err(format!(
                        "{text:?}: expected PATH OP VALUE, e.g. 'up.receiver.bits_per_second >= 400M'"
                    ));
                }
                let v = value.trim();
                let value = v.parse::<f64>().ok().filter(|x| x.is_finite()).or_else(|| {
                    let pct = v.strip_suffix('%').and_then(|p| p.trim().parse::<f64>().ok());
                    pct.or_else(|| netchar_model::units::parse_bytes(v).ok().map(|x| x as f64))
                });
                let value = value.ok_or_else(|| format!("{text:?}: {v:?} is not a number (e.g. 400M, 0.1, 200)"))?;
                return Ok(Self { path, op, value, text: text.trim().to_string() });
            }
        }
        Err(format!("{text:?}: no comparison (use >=, >, <=, < or ==)"))
    }

    /// Whether `measured` meets it.
    pub(crate) fn holds(&self, measured: f64) -> bool {
        match self.op {
            Op::Ge => measured >= self.value,
            Op::Gt => measured > self.value,
            Op::Le => measured <= self.value,
            Op::Lt => measured < self.value,
            Op::Eq => measured == self.value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_parse_with_units_and_percent() {
        let e = Expectation::parse("up.receiver.bits_per_second >= 400M").unwrap();
        assert_eq!((e.path.as_str(), e.op, e.value), ("up.receiver.bits_per_second", Op::Ge, 4e8));
        let e = Expectation::parse("up.receiver.loss_percent < 0.1").unwrap();
        assert_eq!((e.op, e.value), (Op::Lt, 0.1));
        assert!(e.holds(0.05) && !e.holds(0.1));
        let e = Expectation::parse("rr.latency_us.p99<=200").unwrap();
        assert_eq!((e.op, e.value), (Op::Le, 200.0));
        assert!(Expectation::parse("fast").is_err());
        assert!(Expectation::parse("a b >= 1").is_err());
        assert!(Expectation::parse("x >= lots").is_err());
    }
}
