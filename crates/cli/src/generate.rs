//! `netchar completions SHELL` and `netchar man [COMMAND]`: both generated from the clap
//! definition in args.rs, so they never disagree with the flags.

use crate::args::{Cli, CompletionsArgs, ManArgs};
use anyhow::{bail, Result};
use clap::CommandFactory;
use std::io::Write;

/// Prints the completion script for the shell.
pub(crate) fn completions(a: &CompletionsArgs) -> Result<u8> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "netchar", &mut out);
    std::io::stdout().lock().write_all(&out)?;
    Ok(crate::exit::OK)
}

/// Prints netchar(1) (every command in its COMMANDS section), or netchar-COMMAND(1); a
/// command of a command as two words, `suite netio`, or by its page's name, `suite-netio`.
pub(crate) fn man(a: &ManArgs) -> Result<u8> {
    let mut cmd = Cli::command();
    cmd.build();
    let name = a.command.join(" ");
    let page = if a.command.is_empty() {
        cmd
    } else {
        let mut page = &cmd;
        for word in name.split(['-', ' ']).filter(|w| !w.is_empty()) {
            let Some(sub) = page.find_subcommand(word) else {
                let known: Vec<&str> = page.get_subcommands().map(|c| c.get_name()).collect();
                bail!("man {name}: no such command; one of {}", known.join(", "));
            };
            page = sub;
        }
        // Built, the subcommand is titled netchar-tcp and its synopsis reads `netchar tcp`.
        page.clone().version(env!("CARGO_PKG_VERSION"))
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page).render(&mut out)?;
    std::io::stdout().lock().write_all(&out)?;
    Ok(crate::exit::OK)
}
