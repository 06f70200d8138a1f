//! The demo played into a scratch folder, for the demo's tests and the CLI's
//! (`loopward-cli/tests/cli/demo_runs.rs` includes this file).

use loopward_demo::demo::{self, Options};
use loopward_term::render::Printer;

/// The demo's output with `opts` in a new scratch folder (shown as `<scratch>`).
pub(crate) fn play_with(opts: Options) -> (String, tempfile::TempDir) {
    let scratch = tempfile::tempdir().unwrap();
    let out = demo::shared(Printer::plain(Vec::new()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(demo::run(
        Options {
            dir: Some(scratch.path().to_path_buf()),
            ..opts
        },
        out.clone(),
    ))
    .unwrap();
    let bytes = out.lock().unwrap().get_ref().clone();
    let text = String::from_utf8(bytes)
        .unwrap()
        .replace(&scratch.path().display().to_string(), "<scratch>");
    (text, scratch)
}
