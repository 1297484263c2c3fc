//! Writes the seed inputs of the byte-input targets (`netchar_fuzz::bodies::seeds`) into
//! `CORPUS/TARGET/seed-N`, so libFuzzer starts from valid hellos, messages, datagrams, specs and
//! key files instead of guessing magic numbers. Run by bench/fuzz.sh:
//! `cargo run --release --example seeds -- CORPUS`.
use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let corpus = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "corpus".into()));
    for target in ["hello", "control_messages", "datagram", "spec", "spec_fields", "key_file", "nc_test", "netperf"] {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir)?;
        for (i, seed) in netchar_fuzz::bodies::seeds(target).iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i}")), seed)?;
        }
    }
    Ok(())
}
