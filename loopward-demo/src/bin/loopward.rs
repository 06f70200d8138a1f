//! The `loopward` command-line tool.

#![allow(clippy::print_stdout, clippy::print_stderr)]

fn main() {
    println!("loopward: commands arrive with the CLI issue");
}
