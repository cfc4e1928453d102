//! The numbered migration files of a SQL backend, held to the steps it applies.

use std::path::Path;

/// Panics unless `dir` holds exactly one `000N_*.sql` file per step, numbered from 1 with
/// no gap, each with the text of the step at its position in `steps`: a file added but not
/// listed (or listed out of order) would never run.
pub fn assert_numbered_files(dir: &Path, steps: &[&str]) {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            e.unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".sql"))
        .collect();
    files.sort();
    assert_eq!(files.len(), steps.len(), "{files:?}");
    for (i, (name, step)) in files.iter().zip(steps).enumerate() {
        assert!(name.starts_with(&format!("{:04}_", i + 1)), "{name}");
        let text =
            std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&text, step, "{name} is not step {}", i + 1);
    }
}
