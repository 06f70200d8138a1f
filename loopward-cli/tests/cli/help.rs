//! `--help` everywhere: an example on every command, every exit status documented.

use super::*;

#[test]
fn every_command_has_help_with_an_example() {
    let dir = tempfile::tempdir().unwrap();
    for cmd in [
        &["init"][..],
        &["run"],
        &["approve"],
        &["deny"],
        &["override", "grant"],
        &["override", "list"],
        &["override", "revoke"],
        &["gates", "list"],
        &["gates", "add"],
        &["gates", "rm"],
        &["verify"],
        &["report"],
        &["replay"],
        &["say"],
    ] {
        let mut args = cmd.to_vec();
        args.push("--help");
        let o = loopward(dir.path(), &args);
        assert!(o.status.success(), "{cmd:?}");
        let t = text(&o);
        assert!(t.contains("Example"), "{cmd:?} --help has no example:\n{t}");
    }
}

#[test]
fn run_help_documents_every_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let help = text(&loopward(dir.path(), &["run", "--help"]));
    for status in [
        "0 completed",
        "3 a cap was reached",
        "4 strategies exhausted",
        "5 budget",
        "6 stopped by a stop-gate",
        "7 waiting for `loopward",
        "8 the ledger could not be written",
        "9 failed",
        "1 could not start",
    ] {
        assert!(
            help.contains(status),
            "`run --help` does not say {status:?}:\n{help}"
        );
    }
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    for status in [
        "exits 0 when",
        "3 at a cap",
        "4 when",
        "5 over budget",
        "6 when",
        "7\nwhile",
        "8 when",
        "9 when",
        "1 when it could not start",
    ] {
        assert!(
            readme
                .replace('\n', " ")
                .contains(&status.replace('\n', " ")),
            "README does not say {status:?}"
        );
    }
}
