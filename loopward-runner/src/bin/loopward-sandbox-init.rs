//! `loopward-sandbox-init`: the init of a loopward sandbox's PID namespace, for programs that
//! run sandboxes without hosting the init themselves (see
//! `loopward_runner::sandbox::serve_init_if_asked`). Started by the sandbox only.

fn main() -> std::process::ExitCode {
    loopward_runner::sandbox::init_main()
}
