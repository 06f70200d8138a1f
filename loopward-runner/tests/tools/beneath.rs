//! Writes land where they were judged: a symbolic link swapped into the path between the gate's
//! check and the file tool's write makes the write fail, never redirects it into a territory.

use super::gates_support::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const ROOM: &str = r#"
[[territory]]
paths = ["plans/**"]
owner = "planner"

[gates.sprawl]
enabled = false
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_flipped_in_a_loop_while_many_writes_run_leaves_the_territory_untouched() {
    let room = Room::new(ROOM);
    std::fs::create_dir_all(room.path("plans")).unwrap();
    std::fs::create_dir_all(room.path("notes")).unwrap();
    std::os::unix::fs::symlink("plans", room.path("swap")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = stop.clone();
        let root = room.path("");
        std::thread::spawn(move || {
            let dir = rustix::fs::open(&root, rustix::fs::OFlags::PATH, rustix::fs::Mode::empty())
                .unwrap();
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // `notes` is a real folder one moment and a link to `plans` the next.
                rustix::fs::renameat_with(
                    &dir,
                    "notes",
                    &dir,
                    "swap",
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
                flips += 1;
            }
            flips
        })
    };
    let builder = room.turn("builder");
    let (mut written, mut refused, mut failed) = (0, 0, 0);
    for i in 0..400 {
        match room
            .write_file(&builder, "notes/a.md", &format!("write {i}"))
            .await
        {
            Ok(_) => written += 1,
            Err(e) if e.to_string().contains("refused") => refused += 1,
            Err(_) => failed += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().unwrap();
    assert!(flips > 100, "only {flips} flips");
    // The territory holds nothing: every write either landed in the real `notes` folder, was
    // refused (checked while `notes` was the link), or failed (swapped after the check).
    let in_territory: Vec<_> = std::fs::read_dir(room.path("plans"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        in_territory.is_empty(),
        "{in_territory:?} (written {written}, refused {refused}, failed {failed})"
    );
    assert!(written > 0 && written + refused + failed == 400);
}
