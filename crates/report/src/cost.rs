//! A target's cost figures (busy nanoseconds, instructions per unit) as the text and HTML
//! reports write them.

/// A cost with the digits that matter: 5.86 instructions per byte, 187.5 ns, 8850.
pub(crate) fn cost_figure(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 1000.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}
