//! Reads by allow-list: the workspace, not another project or the home folder.

use super::*;

#[test]
fn a_command_reads_the_workspace_but_not_another_project_or_the_home_folder() {
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join(".env"), "OTHER=leaked-from-next-door").unwrap();
    let dir = project(&format!(
        "[[agents.builder]]\ntool_calls = [{{ name = \"shell\", arguments = {{ command = \"cat mine.txt; cat {}/.env; echo other=$?; echo home=$HOME\" }} }}]\n\n\
         [[agents.builder]]\ntext = \"done\"\n",
        other.path().display()
    ));
    let d = dir.path();
    std::fs::write(d.join("mine.txt"), "workspace-ok\n").unwrap();
    let stdout = run_json(d);
    assert!(stdout.contains("workspace-ok"), "{stdout}");
    assert!(stdout.contains("other=1"), "{stdout}");
    assert!(!stdout.contains("leaked-from-next-door"), "{stdout}");
    // HOME is the command's own scratch folder, not the user's.
    assert!(stdout.contains("home=/tmp/loopward-sh-"), "{stdout}");
}
