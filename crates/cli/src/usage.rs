//! Usage errors: clap's error turned into the one line `netchar: error: ...; see netchar
//! SUBCOMMAND --help` that scripts reading stderr expect. Help and version print as clap
//! prints them.

use std::process::ExitCode;

/// Help and version print as clap prints them; every usage error is one line, `netchar:
/// error: <what is wrong>; see netchar SUBCOMMAND --help`, because clap's usage block after
/// the message buries it, and scripts reading stderr expect one line per error.
pub(crate) fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            return ExitCode::from(crate::exit::OK);
        }
        // Help in place of an error is still a usage error (clap exits 2 there too).
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            return ExitCode::from(crate::exit::ERROR);
        }
        _ => {}
    }
    let sub = subcommand_named().map(|s| format!(" {s}")).unwrap_or_default();
    eprintln!("netchar: error: {}; see netchar{sub} --help", usage_message(e));
    ExitCode::from(crate::exit::ERROR)
}

/// What is wrong, on one line: `FLAG VALUE: reason` for a bad value, else clap's first
/// paragraph with its "did you mean" suggestion.
fn usage_message(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) if !v.is_empty() => Some(v.join("', '")),
        _ => None,
    };
    let bad_value = matches!(e.kind(), ErrorKind::ValueValidation | ErrorKind::InvalidValue);
    if let (true, Some(arg), Some(value)) = (bad_value, text(ContextKind::InvalidArg), text(ContextKind::InvalidValue))
    {
        // "--port <PORT>" names the flag and its placeholder; the user knows the flag.
        let flag = arg.split_whitespace().next().unwrap_or(&arg);
        let reason = if arg.ends_with("<PORT>") {
            "not a port number (0-65535)".to_string()
        } else if let Some(valid) = text(ContextKind::ValidValue) {
            format!("expected one of '{valid}'")
        } else {
            value_problem(e, &value)
        };
        let shown = if value.is_empty() { "''" } else { &value };
        return format!("{flag} {shown}: {reason}");
    }
    // clap's first paragraph; "... not provided:" continues on the lines after it.
    let rendered = e.render().to_string();
    let lines: Vec<&str> = rendered.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
    let joined = lines.join(" ");
    let mut what = joined.strip_prefix("error: ").unwrap_or(&joined).to_string();
    for kind in [ContextKind::SuggestedArg, ContextKind::SuggestedSubcommand, ContextKind::SuggestedValue] {
        if let Some(s) = text(kind) {
            what.push_str(&format!(" (did you mean '{s}'?)"));
        }
    }
    what
}

/// Why a value was refused, in words rather than Rust's ("invalid digit found in string").
fn value_problem(e: &clap::Error, value: &str) -> String {
    use std::num::IntErrorKind;
    let Some(source) = std::error::Error::source(e) else { return "invalid value".into() };
    if let Some(int) = source.downcast_ref::<std::num::ParseIntError>() {
        return match int.kind() {
            IntErrorKind::PosOverflow => "too large",
            IntErrorKind::NegOverflow => "too small",
            _ => "not a whole number",
        }
        .into();
    }
    if source.is::<std::num::ParseFloatError>() {
        return "not a number".into();
    }
    let text = source.to_string();
    // clap's range message repeats the value ("70000 is not in 0..=65535").
    text.strip_prefix(&format!("{value} is ")).map(str::to_string).unwrap_or(text)
}

/// The subcommand on the command line, for the `--help` to point to, with the subcommand
/// under it where it has some (`suite netio`). Scanned rather than taken from the error,
/// because clap's value errors do not say which subcommand they are in.
fn subcommand_named() -> Option<String> {
    use clap::CommandFactory;
    let mut cmd = crate::args::Cli::command();
    let mut path: Vec<String> = Vec::new();
    // args_os: std::env::args panics on an argument that is not UTF-8 (a file name).
    for arg in std::env::args_os().skip(1).filter_map(|a| a.into_string().ok()) {
        let Some(sub) = cmd.find_subcommand(&arg).cloned() else { continue };
        path.push(arg);
        cmd = sub;
    }
    (!path.is_empty()).then(|| path.join(" "))
}
